from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "analytics"

    def ready(self) -> None:
        from analytics import hooks
        from analytics.models import AnalysisSettings
        from analytics.study_settings import SETTINGS
        from annotation import extensions, jobs, study_settings

        study_settings.register(AnalysisSettings, "analysis_settings", SETTINGS)
        extensions.add_page_context("settings", hooks.settings_page)
        extensions.add_page_context("item", hooks.item_page)
        extensions.add_page_context("study", hooks.study_page)
        from analytics import arena, budgeting, stored

        jobs.register("report", "analytics.stored.report_job", restartable=True, limit=stored.LIMIT)
        jobs.register("budget", "analytics.budgeting.budget_job", restartable=True, limit=budgeting.LIMIT)
        jobs.register(arena.JOB_KIND, "analytics.arena.arena_board_job", restartable=True, limit=arena.LIMIT)
