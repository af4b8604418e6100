from django.urls import path

from annotation import crowd_views, judge_views, rater_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("studies/", views.study_list, name="study_list"),
    path("studies/new/", views.study_create, name="study_create"),
    path("studies/<int:study_id>/", views.study_detail, name="study_detail"),
    path("studies/<int:study_id>/items/", views.study_items, name="study_items"),
    path("studies/<int:study_id>/preview/", views.study_preview, name="study_preview"),
    path("studies/<int:study_id>/items/<int:item_id>/", views.item_detail, name="item_detail"),
    path("studies/<int:study_id>/settings/", views.study_settings, name="study_settings"),
    path("studies/<int:study_id>/raters/new/", views.rater_create, name="rater_create"),
    path("studies/<int:study_id>/open-link/", views.open_link_toggle, name="open_link_toggle"),
    path("studies/<int:study_id>/open-link/rotate/", views.open_link_rotate, name="open_link_rotate"),
    path("studies/<int:study_id>/raters/bulk/", views.rater_links_bulk, name="rater_links_bulk"),
    path("studies/<int:study_id>/raters/<int:rater_id>/<slug:action>/", views.rater_link, name="rater_link"),
    path("studies/<int:study_id>/status/", views.study_status, name="study_status"),
    path("studies/<int:study_id>/delete/", views.study_delete, name="study_delete"),
    path("studies/<int:study_id>/duplicate/", views.study_duplicate, name="study_duplicate"),
    path("studies/<int:study_id>/external/<int:link_id>/<slug:action>/", crowd_views.external_link_action,
         name="external_link_action"),
    path("studies/<int:study_id>/judgments/import/", views.judgments_import, name="judgments_import"),
    path("studies/<int:study_id>/judgments.<str:fmt>", views.judgments_export, name="judgments_export"),
    path("studies/<int:study_id>/judges/", judge_views.judges, name="judges"),
    path("studies/<int:study_id>/judges/<int:judge_id>/", judge_views.judge_detail, name="judge_detail"),
    path("studies/<int:study_id>/judges/<int:judge_id>/progress/", judge_views.judge_progress,
         name="judge_progress"),
    path("studies/<int:study_id>/judges/<int:judge_id>/<slug:action>/", judge_views.judge_action,
         name="judge_action"),
    path("account/api-token/", views.api_token, name="api_token"),
    # Raters: no account, identified by a signed link.
    # (their own links, /r/<token>/..., are in annotation/rater_urls.py, listed first in config/urls.py)
    path("join/<str:token>/", rater_views.open_link, name="open_link"),
    path("x/<str:token>/", crowd_views.external_entry, name="external_entry"),
    path("studies/<int:study_id>/external/", crowd_views.external_links, name="external_links"),
    path("studies/<int:study_id>/external/block/", crowd_views.block_worker, name="block_worker"),
    path("studies/<int:study_id>/external/gold/", crowd_views.gold_pairs, name="gold_pairs"),
    path("studies/<int:study_id>/external/unblock/<int:block_id>/", crowd_views.unblock_worker,
         name="unblock_worker"),
]
