app_name = "evaluations"
urlpatterns: list = []
