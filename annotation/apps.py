from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"

    def ready(self) -> None:
        from annotation import study_settings
        from annotation.models import CrowdSettings

        study_settings.register(CrowdSettings, "crowd_settings", study_settings.CROWD_SETTINGS)
