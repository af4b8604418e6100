from django.urls import path

from annotation import crowd_views, rater_views, views

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
    path("account/api-token/", views.api_token, name="api_token"),
    # Raters: no account, identified by a signed link.
    path("r/<str:token>/", rater_views.rater_home, name="rater_home"),
    path("r/<str:token>/start/", rater_views.rater_start, name="rater_start"),
    path("r/<str:token>/a/<int:assignment_id>/", rater_views.rate, name="rate"),
    path("r/<str:token>/a/<int:assignment_id>/submit/", rater_views.rate_submit, name="rate_submit"),
    path("join/<str:token>/", rater_views.open_link, name="open_link"),
    path("x/<str:token>/", crowd_views.external_entry, name="external_entry"),
    path("studies/<int:study_id>/external/", crowd_views.external_links, name="external_links"),
    path("studies/<int:study_id>/external/block/", crowd_views.block_worker, name="block_worker"),
    path("studies/<int:study_id>/external/gold/", crowd_views.gold_pairs, name="gold_pairs"),
    path("studies/<int:study_id>/external/unblock/<int:block_id>/", crowd_views.unblock_worker,
         name="unblock_worker"),
]
