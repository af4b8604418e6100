from django.apps import AppConfig


class SelectionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "selection"

    def ready(self) -> None:
        from annotation import study_settings
        from selection.models import SelectionSettings

        study_settings.register(SelectionSettings, "selection_settings")
