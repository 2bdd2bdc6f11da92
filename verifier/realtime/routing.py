from django.urls import path

from verifier.realtime.consumers import RunStepsConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunStepsConsumer.as_asgi()),
]
