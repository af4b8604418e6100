"""The annotation data model: studies, what is compared, who judges, and every judgment.

Coordinates: *A/B* are model coordinates (``Pair.generation_a`` belongs to ``system_a`` of the
comparison); *first/second* are display coordinates (what the rater saw on the left / on top).
Every judgment stores ``a_shown_first`` so both can always be recovered.

One module per concept, the way zulip lays out ``zerver/models/``; everything public is re-exported here, so
``from annotation.models import Study`` is the one way to import a model:

- ``studies``: ``Study``, the files waiting for its import (``Upload``), its ``CrowdSettings`` row
- ``items``: ``System``, ``Item``, ``Generation``
- ``plan``: ``Comparison``, ``Pair``, ``Task``, ``TaskPair``
- ``raters``: ``Rater``, ``Assignment`` and the places and pairs it holds
- ``judgments``: ``Judgment``, an answer on several outputs (``Ranking``) with the judgments it implies, the
  lines of a judgments file being imported (``StagedJudgment``), ``Skip``,
  attention checks and their answers, practice answers
- ``crowd``: links for crowdsourcing sites, worker sessions, the blocklist, MTurk HITs
- ``endpoints``: ``Endpoint`` and what is one (``Judge``, ``SystemEndpoint``), and the ledgers of their calls
- ``jobs``: ``Job``, ``WorkerBeat``
- ``arena``: an arena study's ``Arena`` settings, its ``Battle``s and their ``BattleReply``s
- ``team``: a study's members in their roles (``Membership``) and its ``AuditEntry`` trail

A module of this package imports its neighbours directly (``annotation.models.studies``), never this package.
"""

# In the order the models were declared when they were one module: the app registry lists them (and so every model's
# reverse relations) as before.
# ruff: noqa: I001
from annotation.models.studies import (
    OPEN_LINK_SALT as OPEN_LINK_SALT,
    CrowdSettings as CrowdSettings,
    Study as Study,
    Upload as Upload,
    new_completion_code as new_completion_code,
    new_nonce as new_nonce,
    new_seed as new_seed,
    rater_languages as rater_languages,
)
from annotation.models.items import (
    Generation as Generation,
    Item as Item,
    System as System,
    text_hash as text_hash,
    word_count as word_count,
)
from annotation.models.plan import Comparison as Comparison, Pair as Pair, Task as Task, TaskPair as TaskPair
from annotation.models.raters import (
    DEFAULT_SECONDS_PER_PAIR as DEFAULT_SECONDS_PER_PAIR,
    RATER_TOKEN_SALT as RATER_TOKEN_SALT,
    Assignment as Assignment,
    AssignmentPair as AssignmentPair,
    AssignmentTask as AssignmentTask,
    Rater as Rater,
)
from annotation.models.judgments import (
    GoldAnswer as GoldAnswer,
    GoldPair as GoldPair,
    Judgment as Judgment,
    PracticeAnswer as PracticeAnswer,
    Ranking as Ranking,
    Skip as Skip,
    StagedJudgment as StagedJudgment,
)
from annotation.models.crowd import (
    EXTERNAL_LINK_SALT as EXTERNAL_LINK_SALT,
    BlockedWorker as BlockedWorker,
    CrowdPayment as CrowdPayment,
    ExternalLink as ExternalLink,
    MTurkHIT as MTurkHIT,
    WorkerSession as WorkerSession,
)
from annotation.models.endpoints import (
    Endpoint as Endpoint,
    GenerationCall as GenerationCall,
    Judge as Judge,
    JudgeCall as JudgeCall,
    SystemEndpoint as SystemEndpoint,
    key_variables as key_variables,
    unknown_key_variable as unknown_key_variable,
)
from annotation.models.jobs import Job as Job, WorkerBeat as WorkerBeat
from annotation.models.arena import SIDES as SIDES, Arena as Arena, Battle as Battle, BattleReply as BattleReply
from annotation.models.team import (
    OWNER as OWNER,
    AuditEntry as AuditEntry,
    Membership as Membership,
    Role as Role,
)
