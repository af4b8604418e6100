"""The study page's decisions table: the items at which each pair's first planned look comes."""

from __future__ import annotations

from django import template
from django.db.models import Count

from annotation.models import Task
from selection.core import group_sequential

register = template.Library()


@register.simple_tag
def first_looks(settings) -> dict[str, int]:
    """System pair (as the table labels it) -> the items its first planned look reads: ``look_sizes(pool, K)[0]``,
    the pool being the pair's items the plan can buy (its tasks), as ``selection/hooks.py`` plans the looks. Empty
    without planned looks (the table then shows the interval, valid however often it is read)."""
    looks = settings.looks()
    if not looks:
        return {}
    study = settings.study
    pools = dict(
        Task.objects.filter(study=study)
        .order_by()
        .values("comparison_id")
        .annotate(n=Count("id"))
        .values_list("comparison_id", "n")
    )
    return {
        str(c): group_sequential.look_sizes(pools[c.pk], looks)[0]
        for c in study.comparisons.select_related("system_a", "system_b")
        if pools.get(c.pk)
    }


@register.filter
def of(mapping: dict, key):
    """``mapping[key]``, or None when it is not there."""
    return mapping.get(key)
