"""The base of every error KGV raises for a request it cannot carry out — bad input, a state that forbids the
action — as opposed to a defect. The API answers these with its error shape and a 4xx (verifier/api/errors.py);
any other exception is a 500, logged with its traceback. Derived from ValueError, so a caller that checks
input with ``except ValueError`` still catches them."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent


class ApplicationError(ValueError):
    """A request KGV refuses, with a message for the person who made it."""


# The most problems (bad rows of an import) a page or an API answer lists, with the count of all of them beside:
# a file of 100,000 bad rows is answered in a few kilobytes, and the first ones are what a person fixes first.
MAX_LISTED_PROBLEMS = 100


def listed(problems: list) -> list:
    """The problems a page or an API answer lists."""
    return problems[:MAX_LISTED_PROBLEMS]


def body_refusal(exc: Exception) -> tuple[int, str, str] | None:
    """Django's refusal to parse a request body (``RequestDataTooBig``, ``TooManyFieldsSent``, ``TooManyFilesSent``) as
    the status, error code and message KGV answers it with, or None for any other exception. Left to Django, these
    are a 400 page (HTML even under /api/) and a traceback in the log, for a request that merely asks too much."""
    if isinstance(exc, RequestDataTooBig):
        return 413, "too_large", (f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1024 ** 2:g} MB "
                                  "(only a file upload may be larger).")
    if isinstance(exc, TooManyFieldsSent):
        return 400, "invalid", f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields."
    if isinstance(exc, TooManyFilesSent):
        return 400, "invalid", f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files."
    return None
