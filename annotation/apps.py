from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"

    def ready(self) -> None:
        from annotation import ratelimit, study_settings

        del ratelimit  # imported for its deploy check (a cache the server processes share)
        from annotation.models import CrowdSettings

        study_settings.register(CrowdSettings, "crowd_settings", study_settings.CROWD_SETTINGS)
