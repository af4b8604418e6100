from rest_framework.routers import DefaultRouter

from annotation.views.api import StudyViewSet

router = DefaultRouter()
router.register("studies", StudyViewSet, basename="study")
urlpatterns = router.urls
