from django.urls import path

from selection import views

urlpatterns = [
    path("studies/<int:study_id>/separability/", views.separability, name="separability"),
    path("studies/<int:study_id>/separability/compute/", views.separability_start, name="separability_start"),
    path("studies/<int:study_id>/jobs/<int:job_id>/", views.job_progress, name="job_progress"),
    path("studies/<int:study_id>/embed/", views.embedding_start, name="embedding_start"),
    path("studies/<int:study_id>/selection/", views.live_selection, name="live_selection"),
]
