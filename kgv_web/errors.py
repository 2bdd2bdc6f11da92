"""What the debug error page may show."""

import re

from django.utils.regex_helper import _lazy_re_compile
from django.views.debug import SafeExceptionReporterFilter


class CredentialFilter(SafeExceptionReporterFilter):
    """Django's filter, also hiding settings that carry credentials inside URLs (DATABASE_URL, REDIS_URL,
    LLM_BASE_URL, CELERY_BROKER_URL, the Channels and cache locations)."""

    hidden_settings = _lazy_re_compile("API|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|DATABASE|REDIS|BROKER|"
                                       "BACKEND|LOCATION|CHANNEL|CACHES", flags=re.IGNORECASE)
