"""Onboarding a KG from a file over the API (admins, who manage KGs): upload a TSV or N-Triples file with the KG's name
(checked first, nothing kept when it is refused), then follow the onboarding's stage and progress to what was reached."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from verifier.models import Onboarding
from verifier.onboarding import summary_lines
from verifier.onboarding_uploads import onboard_upload
from verifier.roles import ADMIN


class OnboardingSerializer(serializers.ModelSerializer):
    summary = serializers.SerializerMethodField(help_text="what was reached and how long each stage took (once finished)")

    class Meta:
        model = Onboarding
        fields = ["id", "name", "status", "stage", "progress", "seconds", "quality", "error", "kg", "created_at", "finished_at",
                  "summary"]
        read_only_fields = fields
        extra_kwargs = {"progress": {"help_text": "0–1 over every stage"},
                        "kg": {"help_text": "the KG, once its file is loaded"}}

    def get_summary(self, onboarding: Onboarding) -> list[str]:
        return summary_lines(onboarding) if onboarding.status == Onboarding.Status.FINISHED else []


class OnboardingCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="the KG's name: letters, digits, - and _")
    file = serializers.FileField(help_text="a .tsv or .txt file of head<TAB>relation<TAB>tail lines, or an .nt (N-Triples) file")


class OnboardingViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """KGs onboarded from files, newest first."""

    queryset = Onboarding.objects.all()
    serializer_class = OnboardingSerializer
    read_role = ADMIN
    write_role = ADMIN

    @extend_schema(request={"multipart/form-data": OnboardingCreateSerializer}, responses={201: OnboardingSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        """Check the file and send its onboarding to the training workers → 201; a bad or taken name, or a file the loader
        cannot read, is a 400 (malformed lines: ``import_rejected`` with every one) and keeps nothing."""
        form = OnboardingCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        onboarding = onboard_upload(upload=form.validated_data["file"], name=form.validated_data["name"].strip(),
                                    actor=request.user)
        return Response(OnboardingSerializer(onboarding).data, status=status.HTTP_201_CREATED)
