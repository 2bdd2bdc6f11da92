"""Websocket consumer streaming a run's steps: catch-up from the database, then live from Redis."""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from verifier.models import Run, Step
from verifier.params import is_id
from verifier.realtime.events import run_group
from verifier.realtime.publish import run_payload, step_payload
from verifier.roles import VIEWER, has_role

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class UnknownPathConsumer(AsyncJsonWebsocketConsumer):
    """Any websocket path no route serves: the handshake is refused (closed with 4404), as a missing page is a
    404; without it the router raises and the server answers 500 and logs a traceback."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_NOT_FOUND)


class RunStepsConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/runs/<id>/?after=<seq>``: every step with seq > after, in order, without duplicates.

    The consumer joins the run's group before reading the backlog, so a step committed in between
    arrives twice at most and is dropped by sequence number: nothing is lost on reconnect.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(has_role)(user, VIEWER):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        run = await self._get_run()
        if run is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = query.get("after", ["0"])[0]
        self.last_seq = int(after) if is_id(after) else 0
        self.group = run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "run.status", "run": run_payload(run)})
        for step in await self._steps_after(self.last_seq):
            await self._send_step(step)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_step(self, message: dict) -> None:
        await self._send_step(message["step"])

    async def run_status(self, message: dict) -> None:
        await self.send_json({"type": "run.status", "run": message["run"]})

    async def _send_step(self, step: dict) -> None:
        if step["seq"] <= self.last_seq:
            return
        self.last_seq = step["seq"]
        await self.send_json({"type": "run.step", "step": step})

    @database_sync_to_async
    def _get_run(self) -> Run | None:
        return Run.objects.filter(pk=self.run_id).first()

    @database_sync_to_async
    def _steps_after(self, seq: int) -> list[dict]:
        return [step_payload(s) for s in Step.objects.filter(run_id=self.run_id, seq__gt=seq).order_by("seq")]
