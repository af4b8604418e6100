from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "analytics"

    def ready(self) -> None:
        from analytics.models import AnalysisSettings
        from annotation import study_settings

        study_settings.register(AnalysisSettings, "analysis_settings")
