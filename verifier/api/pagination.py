"""Page-number pagination for every API list: ``?page=2&page_size=100`` (at most 500 per page)."""

from rest_framework.pagination import PageNumberPagination


class PagePagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
