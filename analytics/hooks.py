"""What analytics shows on annotation's pages (``annotation/extensions.py``), registered by
``AnalyticsConfig.ready``."""

from __future__ import annotations

from analytics.services import analysis_parameters


def settings_page(study) -> dict:
    # what the stored settings become, through the same function the report calls
    return {"analysis_parameters": analysis_parameters(study)}
