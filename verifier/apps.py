from django.apps import AppConfig


class VerifierConfig(AppConfig):
    name = "verifier"
    verbose_name = "KGV verifier"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing the confidence model connects its receiver of structure.signals.model_ready, in every process
        # that may train a structural model; it needs the app registry, hence here rather than at the top.
        from verifier import confidence  # noqa: F401
