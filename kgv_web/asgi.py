"""ASGI entry point: HTTP through Django, websockets through Channels (session-authenticated), the whole application
behind the request-size limits (kgv_web/request_limits.py; Daphne taught them by kgv_web/daphne_limits.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
django_asgi_app = get_asgi_application()  # sets Django up before the consumers import models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from kgv_web import daphne_limits  # noqa: E402
from kgv_web.request_limits import RequestLimits  # noqa: E402
from verifier.realtime.routing import router  # noqa: E402

daphne_limits.install()

application = RequestLimits(ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(router())),
    }
))
