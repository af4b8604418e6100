from django.urls import path

from annotation.views import arena_settings, crowd, judges, raters, runs, studies, systems, team, uploads

urlpatterns = [
    path("", studies.home, name="home"),
    path("studies/", studies.study_list, name="study_list"),
    path("studies/new/", studies.study_create, name="study_create"),
    path("studies/<int:study_id>/", studies.study_detail, name="study_detail"),
    path("studies/<int:study_id>/preview/", studies.study_preview, name="study_preview"),
    path("studies/<int:study_id>/items/<int:item_id>/", studies.item_detail, name="item_detail"),
    path("studies/<int:study_id>/settings/", studies.study_settings, name="study_settings"),
    path("studies/<int:study_id>/arena/settings/", arena_settings.arena_settings, name="arena_settings"),
    path("studies/<int:study_id>/raters/new/", studies.rater_create, name="rater_create"),
    path("studies/<int:study_id>/open-link/", studies.open_link_toggle, name="open_link_toggle"),
    path("studies/<int:study_id>/open-link/rotate/", studies.open_link_rotate, name="open_link_rotate"),
    path("studies/<int:study_id>/raters/bulk/", studies.rater_links_bulk, name="rater_links_bulk"),
    path("studies/<int:study_id>/raters/<int:rater_id>/<slug:action>/", studies.rater_link, name="rater_link"),
    path("studies/<int:study_id>/status/", studies.study_status, name="study_status"),
    path("studies/<int:study_id>/delete/", studies.study_delete, name="study_delete"),
    path("studies/<int:study_id>/duplicate/", studies.study_duplicate, name="study_duplicate"),
    path("studies/<int:study_id>/team/", team.team_page, name="team"),
    path("studies/<int:study_id>/team/<int:member_id>/", team.member_change, name="member_change"),
    path(
        "studies/<int:study_id>/external/<int:link_id>/<slug:action>/",
        crowd.external_link_action,
        name="external_link_action",
    ),
    path("studies/<int:study_id>/judgments/import/", studies.judgments_import, name="judgments_import"),
    path("studies/<int:study_id>/rankings/import/", studies.rankings_import, name="rankings_import"),
    path("studies/<int:study_id>/rankings.jsonl", studies.rankings_export, name="rankings_export"),
    path("studies/<int:study_id>/uploads/<int:upload_id>/resume/", uploads.upload_resume, name="upload_resume"),
    path("studies/<int:study_id>/uploads/<int:upload_id>/discard/", uploads.upload_discard, name="upload_discard"),
    path("studies/<int:study_id>/judgments.<str:fmt>", studies.judgments_export, name="judgments_export"),
    path("studies/<int:study_id>/judges/", judges.judges, name="judges"),
    path("studies/<int:study_id>/judges/<int:judge_id>/", judges.judge_detail, name="judge_detail"),
    path(
        "studies/<int:study_id>/judges/<int:pk>/progress/", runs.run_progress, {"kind": "judge"}, name="judge_progress"
    ),
    path(
        "studies/<int:study_id>/judges/<int:pk>/<slug:action>/", runs.run_action, {"kind": "judge"}, name="judge_action"
    ),
    path("studies/<int:study_id>/systems/", systems.systems, name="systems"),
    path("studies/<int:study_id>/systems/<int:endpoint_id>/", systems.system_detail, name="system_detail"),
    path(
        "studies/<int:study_id>/systems/<int:pk>/progress/",
        runs.run_progress,
        {"kind": "generate"},
        name="system_progress",
    ),
    path(
        "studies/<int:study_id>/systems/<int:pk>/<slug:action>/",
        runs.run_action,
        {"kind": "generate"},
        name="system_action",
    ),
    path("account/api-token/", studies.api_token, name="api_token"),
    # Raters: no account, identified by a signed link.
    # (their own links, /r/<token>/..., are in annotation/views/rater_urls.py, listed first in config/urls.py)
    path("join/<str:token>/", raters.open_link, name="open_link"),
    path("x/<str:token>/", crowd.external_entry, name="external_entry"),
    path("studies/<int:study_id>/external/", crowd.external_links, name="external_links"),
    path("studies/<int:study_id>/external/block/", crowd.block_worker, name="block_worker"),
    path("studies/<int:study_id>/external/pay/", crowd.pay_worker, name="pay_worker"),
    path("studies/<int:study_id>/external/gold/", crowd.gold_pairs, name="gold_pairs"),
    path("studies/<int:study_id>/external/unblock/<int:block_id>/", crowd.unblock_worker, name="unblock_worker"),
]
