from django.urls import path

from analytics import curation_views, review_views, views

urlpatterns = [
    path("studies/<int:study_id>/report/", views.report, name="report"),
    path("studies/<int:study_id>/report/status/", views.report_status, name="report_status"),
    path("studies/<int:study_id>/report/<slug:name>.csv", views.report_table, name="report_table"),
    path("api/studies/<int:study_id>/report/", views.report_api, name="report_api"),
    path("studies/<int:study_id>/budget/", views.budget_start, name="budget_start"),
    path("api/studies/<int:study_id>/budget/", views.budget_api, name="budget_api"),
    path("studies/<int:study_id>/arena/board/", views.arena_board, name="arena_board"),
    path("studies/<int:study_id>/arena/board/body/", views.arena_board_body, name="arena_board_body"),
    path("studies/<int:study_id>/review/", review_views.review_queue, name="review_queue"),
    path("studies/<int:study_id>/items/", curation_views.study_items, name="study_items"),
    path("studies/<int:study_id>/items/actions/", curation_views.curate, name="curate_items"),
    path("api/studies/<int:study_id>/items/actions/", curation_views.curate_api, name="curate_items_api"),
    path("api/studies/<int:study_id>/data-manager/", curation_views.data_manager_api, name="data_manager_api"),
    path("studies/<int:study_id>/review/pairs/<int:pair_id>/", review_views.adjudicate, name="adjudicate"),
    path("api/studies/<int:study_id>/rulings/", review_views.rulings_api, name="rulings_api"),
    path("studies/<int:study_id>/review/adjudications.csv", review_views.adjudications_csv, name="adjudications_csv"),
]
