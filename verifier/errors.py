"""The base of every error KGV raises for a request it cannot carry out — bad input, a state that forbids the
action — as opposed to a defect. The API answers these with its error shape and a 4xx (verifier/api/errors.py);
any other exception is a 500, logged with its traceback. Derived from ValueError, so a caller that checks
input with ``except ValueError`` still catches them."""


class ApplicationError(ValueError):
    """A request KGV refuses, with a message for the person who made it."""


# The most problems (bad rows of an import) a page or an API answer lists, with the count of all of them beside:
# a file of 100,000 bad rows is answered in a few kilobytes, and the first ones are what a person fixes first.
MAX_LISTED_PROBLEMS = 100


def listed(problems: list) -> list:
    """The problems a page or an API answer lists."""
    return problems[:MAX_LISTED_PROBLEMS]
