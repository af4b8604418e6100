"""SepLab settings, driven by environment variables (healthchecks-style).

Defaults give a working local install on SQLite; production overrides come from the environment:
``DATABASE_URL``, ``SECRET_KEY``, ``DEBUG``, ``ALLOWED_HOSTS``.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.environ.get(name, default))


# Production-safe by default: DEBUG is off unless the environment says DEBUG=1 (`make run`, `make test` and the
# bench scripts do; so does a developer's shell). Off, the app refuses to start on the development key.
DEBUG = envbool("DEBUG", "0")
DEVELOPMENT_KEY = "seplab-local-development-key-not-for-production"
SECRET_KEY = os.environ.get("SECRET_KEY", DEVELOPMENT_KEY)
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000")
if not DEBUG:
    # Production refuses to start on development defaults rather than run insecurely.
    if SECRET_KEY == DEVELOPMENT_KEY or len(SECRET_KEY) < 50:
        raise ImproperlyConfigured(
            "DEBUG=0 needs a real SECRET_KEY (50+ random characters) in the environment; "
            "for local development set DEBUG=1 (make run does)."
        )
    if not os.environ.get("ALLOWED_HOSTS"):
        raise ImproperlyConfigured("DEBUG=0 needs ALLOWED_HOSTS (comma-separated host names) in the environment.")

# HTTPS=1 when the site is served over TLS (directly or behind a proxy that sets X-Forwarded-Proto).
HTTPS = envbool("HTTPS", "0")
# Behind a reverse proxy (the README's nginx): the client's address is the one the proxy appended to
# X-Forwarded-For (annotation.ratelimit.client_ip), never a value the client sent; SEPLAB_PROXY_COUNT trusted
# proxies in a chain (a CDN in front of nginx is 2). Without BEHIND_PROXY the header is ignored.
BEHIND_PROXY = envbool("BEHIND_PROXY", "0")
SEPLAB_PROXY_COUNT = envint("SEPLAB_PROXY_COUNT", "1")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# The Content-Security-Policy of every page (rater pages add the crowdsourcing sites as frame ancestors).
# (form-action adds SEPLAB_TURK_SUBMIT_HOSTS, where finished MTurk-style workers post their HIT.)
# No 'unsafe-inline' anywhere: progress bars are <progress> elements, htmx's indicator style is off
# (htmx-config), and rendered Markdown carries class names only (annotation/rendering.py).
SEPLAB_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'self'"
)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # thousands grouped in tables (intcomma)
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_tasks",
    "django_tasks_db",
    "axes",
    "annotation",
    "selection",
    "analytics",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into its 429 page
]

# Login lockout (django-axes, for the researcher login and /admin/login/ alike): 10 failed logins lock the
# username for 15 minutes whatever address they come from, and lock the client's address for every username;
# a success resets the count. Attempts are recorded in the database (visible in /admin/, reset with
# `python manage.py axes_reset`).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("SEPLAB_LOGIN_FAILURES", "10")
AXES_COOLOFF_TIME = datetime.timedelta(minutes=envint("SEPLAB_LOGIN_COOLOFF_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "annotation.ratelimit.login_client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
AXES_DISABLE_ACCESS_LOG = True  # failures are what the lockout needs; successful logins are not logged

if not DEBUG:  # production serves collected static files itself (runserver does it in development)
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotation.context_processors.worker",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

# SQLite by default; PostgreSQL (or anything dj-database-url understands) via DATABASE_URL.
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=envint("DB_CONN_MAX_AGE", "0"),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock up front, so concurrent writers queue (for up to
    # `timeout` seconds) instead of failing with "database is locked" half-way through a transaction.
    # Write-ahead logging: readers (every rating page) never wait for a writer, and a commit is one
    # append + fsync of the log; synchronous=FULL keeps every acknowledged judgment on disk.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": float(os.environ.get("SQLITE_TIMEOUT", "20")),
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
        }
    )
    # A file-backed test database lets threads (concurrency tests, the browser's live server) share it
    # (tests/conftest.py gives each test run its own file name).
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / ".test-db.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and envbool("DB_TRANSACTION_POOLER", "0"):
    # Behind PgBouncer in transaction pooling (bench/cluster.py runs this): consecutive transactions of one Django
    # connection may reach different server connections, so no prepared statements and no server-side (named)
    # cursors, which live across transactions.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and envbool("DB_SERVER_SIDE_BINDING", "1"):
    # Server-side parameter binding + prepared statements: psycopg prepares a query after 5 executions
    # on a connection, so PostgreSQL stops re-planning the rating page's joins on every request
    # (bench/README.md: planning, not execution, dominated them). Pays with persistent connections
    # (DB_CONN_MAX_AGE). Behind a transaction-pooling PgBouncer set DB_TRANSACTION_POOLER=1 instead.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "study_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The languages rater pages are shipped in (researcher pages stay English): a study speaks one of them to its
# raters, or the one their browser asks for (Study.raters_language, annotation/access.py). No LocaleMiddleware: the
# study, not the visitor, decides, and only on rater pages. The catalogues are compiled and committed (locale/).
LANGUAGES = [("en", "English"), ("de", "German")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production serves hashed, compressed static files through whitenoise (after collectstatic).
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# The sentence encoder (selection/embedding.py): the packaged all-MiniLM-L6-v2 by default (also when set empty), or a
# local sentence-transformers model directory.
SEPLAB_ENCODER = os.environ.get("SEPLAB_ENCODER") or "all-MiniLM-L6-v2"

# Background work (embedding a study, separability): django-tasks on the database by default, run by
# `python manage.py run_worker` (annotation/worker.py); SEPLAB_TASKS_BACKEND can name another django-tasks backend.
if os.environ.get("SEPLAB_TASKS_BACKEND", "").startswith("django_tasks_rq."):
    # django-tasks-rq (not a requirement: `pip install django-tasks-rq`): the queue on Redis, run by `python manage.py
    # rqworker --job-class django_tasks_rq.Job default`. bench/README.md ("Past one machine") compares it with the
    # database queue under kill -9.
    INSTALLED_APPS += ["django_rq"]
    RQ_QUEUES = {
        "default": {"URL": os.environ.get("RQ_URL") or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")}
    }
TASKS = {
    "default": {
        "BACKEND": os.environ.get("SEPLAB_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default"],
    }
}

# A running background job whose worker has given no sign of life for this long is failed as vanished
# (annotation/worker.py); the worker beats every 10 s.
SEPLAB_JOB_STALE_SECONDS = float(os.environ.get("SEPLAB_JOB_STALE_SECONDS", "120"))

# Fair share of the workers (annotation/worker.py, annotation/jobs.py): at most this many of one researcher's jobs
# run at once, however many workers there are (the rest wait while the worker takes the researcher served least
# recently first), and one researcher may have at most SEPLAB_JOBS_PER_KIND jobs of each kind queued or running.
SEPLAB_JOBS_PER_RESEARCHER = int(os.environ.get("SEPLAB_JOBS_PER_RESEARCHER", "2"))
SEPLAB_JOBS_PER_KIND = int(os.environ.get("SEPLAB_JOBS_PER_KIND", "10"))
# Jobs one `run_worker` runs at once (threads; `--slots`), 1 by default (one job at a time, in the order the fair
# claim picks). In production run one more than a researcher's share (3), so one researcher's long or hung jobs never
# hold every slot.
SEPLAB_WORKER_SLOTS = int(os.environ.get("SEPLAB_WORKER_SLOTS", "1"))
if min(SEPLAB_JOBS_PER_RESEARCHER, SEPLAB_JOBS_PER_KIND, SEPLAB_WORKER_SLOTS) < 1:
    raise ImproperlyConfigured(
        "SEPLAB_JOBS_PER_RESEARCHER, SEPLAB_JOBS_PER_KIND and SEPLAB_WORKER_SLOTS must be 1 or more"
    )

# A judge run gives the worker back after this many seconds and goes on in a new job queued behind the others, so
# one researcher's judge never holds the worker while other researchers' jobs wait.
SEPLAB_JUDGE_SLICE_SECONDS = float(os.environ.get("SEPLAB_JUDGE_SLICE_SECONDS", "300"))

# Secrets researchers store with a study (judges' API keys) are encrypted with a key derived from this
# (annotation/secrets_at_rest.py); unset, from SECRET_KEY. Changing it makes stored keys unreadable (asked again).
SEPLAB_ENCRYPTION_KEY = os.environ.get("SEPLAB_ENCRYPTION_KEY", "")

# LLM judges and generated systems may read their API key only from these environment variables of the worker,
# each tied to the hosts it is for: NAME=HOST[|HOST...], comma-separated, host names without ports
# ("OPENAI_API_KEY=api.openai.com,OTHER=host1|host2"). Any other name is refused, so a researcher cannot have the
# server send its SECRET_KEY, DATABASE_URL or cloud credentials anywhere; a variable is sent to its own hosts only
# (annotation/outbound.py); a name without hosts is refused by `check --deploy`. Empty: stored keys only.
SEPLAB_JUDGE_KEY_VARIABLES = {
    name.strip(): [host.strip().lower() for host in hosts.split("|") if host.strip()]
    for name, _, hosts in (
        entry.partition("=")
        for entry in os.environ.get("SEPLAB_JUDGE_KEY_VARIABLES", "OPENAI_API_KEY=api.openai.com").split(",")
    )
    if name.strip()
}

# An endpoint's reply is read up to this many bytes; a longer one is cut off and recorded as a failed call.
SEPLAB_ENDPOINT_REPLY_BYTES = envint("SEPLAB_ENDPOINT_REPLY_BYTES", str(4 * 1024 * 1024))
# The most time one request of a judge or a generated system may take with all its attempts: its timeout times its
# attempts (1 + retries) may not exceed this (checked when it is saved), and a request still out after it is cut off.
# Keep it within SEPLAB_JUDGE_SLICE_SECONDS: a slice's end cuts off what is out, so a longer request would never end.
SEPLAB_ENDPOINT_REQUEST_SECONDS = float(os.environ.get("SEPLAB_ENDPOINT_REQUEST_SECONDS", "300"))

# LLM judges' endpoints may not be loopback, private or link-local addresses (annotation/outbound.py) unless named
# here (host names, addresses or networks, comma-separated), e.g. a local vLLM at 127.0.0.1. With DEBUG on the
# default allows loopback only; production allows none until the operator says.
SEPLAB_JUDGE_PRIVATE_HOSTS = [
    v.strip()
    for v in os.environ.get("SEPLAB_JUDGE_PRIVATE_HOSTS", "127.0.0.1,::1,localhost" if DEBUG else "").split(",")
    if v.strip()
]

# New crowd workers one link accepts per minute (a crowd site's launch: Prolific fills hundreds of places in
# minutes); a link can set its own on the crowd page. 0: no limit (load benchmarks).
SEPLAB_CROWD_LAUNCH_PER_MINUTE = envint("SEPLAB_CROWD_LAUNCH_PER_MINUTE", "600")
# The most unanswered assignments (active, without an answer yet) the workers who came through one crowd link may
# hold at once, however each was started (annotation/rating/holds.py), so invented ids from many networks cannot hold
# a whole study; a start beyond it is asked to come back in a minute. 0: no cap (load benchmarks).
SEPLAB_CROWD_UNANSWERED_PER_LINK = envint("SEPLAB_CROWD_UNANSWERED_PER_LINK", "200")

# Crowdsourcing: sites allowed to frame rater pages, and where MTurk-style completion forms may post.
SEPLAB_FRAME_ANCESTORS = [
    o
    for o in os.environ.get(
        "SEPLAB_FRAME_ANCESTORS",
        "https://worker.mturk.com https://workersandbox.mturk.com https://www.mturk.com https://app.prolific.com",
    ).split()
    if o
]
SEPLAB_TURK_SUBMIT_HOSTS = [
    o
    for o in os.environ.get("SEPLAB_TURK_SUBMIT_HOSTS", "https://www.mturk.com https://workersandbox.mturk.com").split()
    if o
]
PROLIFIC_COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"
PROLIFIC_API_URL = os.environ.get("PROLIFIC_API_URL", "https://api.prolific.com")
# The researcher's Prolific API token (`manage.py prolific`, annotation/crowd/prolific.py); empty: the command says so.
PROLIFIC_TOKEN = os.environ.get("PROLIFIC_TOKEN", "")

# The cache backs rate limiting; use Redis when several server processes must share the counts.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ["REDIS_URL"],
        "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", ""),
    }
    if os.environ.get("REDIS_URL")
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Uploads: the importer enforces its own limit and reports it as a validation error.
SEPLAB_MAX_IMPORT_BYTES = envint("SEPLAB_MAX_IMPORT_BYTES", str(50 * 1024 * 1024))
# The most records (a study file's items, a judgments file's lines) an import writes in one transaction
# (annotation/uploads.py): a larger file is imported in steps of this many -- from the browser checked in the request,
# then imported by the worker with progress -- so no request holds the database's write lock for long.
SEPLAB_IMPORT_STEP = envint("SEPLAB_IMPORT_STEP", "2000")
# The longest input, reference or output a study file may hold, in characters (annotation/exchange/study_files.py):
# a longer one is refused with its line and field.
SEPLAB_MAX_TEXT_CHARS = envint("SEPLAB_MAX_TEXT_CHARS", "100000")
# The longest text shown as rendered Markdown (annotation/rendering.py); a longer one is shown as plain text, so no
# page spends more than a bounded time rendering one text.
SEPLAB_MARKDOWN_MAX_CHARS = envint("SEPLAB_MARKDOWN_MAX_CHARS", "20000")
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON for clients; for browsers, DRF's page made accessible (annotation/views/api_renderers.py)
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "annotation.views.api_renderers.AccessibleBrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "annotation.views.api_pagination.StrictPageNumberPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "annotation.views.api.SepLabAutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "SepLab API",
    "DESCRIPTION": "Studies, items and judgments of SepLab human preference evaluations.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_tokens": {"()": "config.logfilters.RedactTokens"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact_tokens"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # django.request logs 4xx/5xx with the path: route it through the same redacting handler
    "loggers": {"django.request": {"handlers": ["console"], "level": "WARNING", "propagate": False}},
}
