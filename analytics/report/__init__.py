"""The study report, one module per section, each returning a typed result (frozen dataclasses) that the page, the
CSV tables and the JSON read by attribute; ``assembly`` puts the sections together and ``serial`` is the one
converter to and from the JSON form (``report --json``, the API, the stored report; the keys of
docs/interfaces.md#report-json).

Conventions (documented in the README):
- model coordinates: rating r = -1 (A preferred), 0 (no preference), +1 (B preferred), read off the stored
  answer by ``annotation.elicitation.effective_choice`` whatever the elicitation mode (annotation/elicitation.py): a
  5-point answer by its side, a response set of one system as a choice of it, of both or of neither (and a
  forced "both are bad") as no preference;
- a rating set is one rater's judgments of one item for one system pair (``selection.rating_sets``, the one reader);
- every judgment with a choice is one battle for the leaderboards, in creation order (or, per the study's
  setting, the majority of each rated pair, or one judgment sampled per item and system pair);
- sep-ELO weights each battle by the separability of its item (the study's separability metric);
  an item without separability gets the neutral weight K;
- ELO and sep-ELO are headlined and ranked by their bootstrap median (the online pass is kept as "online");
- who won an item is ``selection.core.winners.item_winner`` over its human raters (the live loop's rule too);
- positional bias is P(first shown chosen) over non-tie choices;
- indeterminacy compares judges with humans on the pairs both judged; a forced-choice tie is the
  response set {A, B}, an empty response set ("both are bad") is Omega = [0, 0], and beta is applied to
  both options.
"""
