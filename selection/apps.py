from django.apps import AppConfig


class SelectionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "selection"

    def ready(self) -> None:
        from annotation import extensions, jobs, study_settings
        from selection import hooks
        from selection.models import SelectionSettings
        from selection.study_settings import SETTINGS

        study_settings.register(SelectionSettings, "selection_settings", SETTINGS)
        extensions.set_item_chooser(hooks.CHOOSER)
        extensions.add_page_context("study", hooks.study_page)
        extensions.add_page_context("settings", hooks.settings_page)
        from selection import jobs as selection_jobs

        jobs.register(
            "separability", "selection.jobs.separability_job", restartable=True, limit=selection_jobs.SEPARABILITY
        )
        jobs.register("embed", "selection.jobs.embedding_job", restartable=True, limit=selection_jobs.EMBED)
        jobs.register(
            "arena_separability",
            "selection.jobs.arena_separability_job",
            restartable=True,
            limit=selection_jobs.ARENA_SEPARABILITY,
        )
