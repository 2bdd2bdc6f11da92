"""Request rates (settings: REST_FRAMEWORK's DEFAULT_THROTTLE_RATES).

DRF checks throttles after authentication and permissions, so a caller without valid credentials — or one
guessing tokens — would get an endless stream of cheap 401s. Such callers are counted by address in the
"anon" rate before they are answered: ``AnonymousRate`` (the first permission class) counts callers that
sent no credentials, ``CountedTokenAuthentication`` counts wrong tokens. Signed-in users are counted per
account by DRF's UserRateThrottle in the usual place.
"""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.permissions import BasePermission
from rest_framework.throttling import SimpleRateThrottle


class _AddressRate(SimpleRateThrottle):
    scope = "anon"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def _count_by_address(request, view) -> None:
    throttle = _AddressRate()
    if not throttle.allow_request(request, view):
        raise Throttled(wait=throttle.wait())


class AnonymousRate(BasePermission):
    def has_permission(self, request, view) -> bool:
        if not request.user.is_authenticated:
            _count_by_address(request, view)
        return True


class CountedTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            _count_by_address(request, None)
            raise
