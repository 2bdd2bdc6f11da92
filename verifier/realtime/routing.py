"""Websocket routes. ``router`` answers every path: those below reach their consumer, any other is closed cleanly
(UnknownPathConsumer) instead of making the router raise."""

from channels.routing import URLRouter
from django.urls import path, re_path

from verifier.realtime.consumers import RunStepsConsumer, UnknownPathConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunStepsConsumer.as_asgi()),
]


def router() -> URLRouter:
    """The websocket routes with a last route that catches every other path and closes it."""
    return URLRouter([*websocket_urlpatterns, re_path(r"", UnknownPathConsumer.as_asgi())])
