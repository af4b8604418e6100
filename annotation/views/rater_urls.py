"""A rater's routes, under /r/<token>/. config/urls.py lists them first: they carry nearly all the traffic
(one request per judgment), and Django tries a request's path against the patterns in order, so every
pattern before them cost each judgment (URL resolution was 6-7 % of the server's CPU at 50 raters at
maximum pace when they came last; bench/README.md, "Raters under load")."""

from django.urls import path

from annotation.views import arena, raters

urlpatterns = [
    path("", raters.rater_home, name="rater_home"),
    path("start/", raters.rater_start, name="rater_start"),
    path("consent/", raters.rater_consent, name="rater_consent"),
    path("practice/", raters.rater_practice, name="rater_practice"),
    path("a/<int:assignment_id>/", raters.rate, name="rate"),
    path("a/<int:assignment_id>/submit/", raters.rate_submit, name="rate_submit"),
    path("arena/", arena.arena_home, name="arena_home"),
    path("arena/<int:battle_id>/", arena.arena_battle, name="arena_battle"),
    path("arena/<int:battle_id>/stream/<str:side>/", arena.arena_stream, name="arena_stream"),
    path("arena/<int:battle_id>/turn/", arena.arena_turn, name="arena_turn"),
    path("arena/<int:battle_id>/vote/", arena.arena_vote, name="arena_vote"),
]
