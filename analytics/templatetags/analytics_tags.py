from django import template

from analytics import columns

register = template.Library()


@register.filter
def cell(value):
    """A table cell outside the column table (analytics.columns.COLUMNS): a probability or share to 3 decimals,
    a count with thousands grouped, missing values as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return columns.as_share(value)
    if isinstance(value, int):
        return columns.as_count(value)
    return value


@register.filter
def column_label(name: str, section: str = "") -> str:
    """A report column's (or a judge metric's) header in words, from the one column table."""
    return columns.label(name, section)


@register.filter
def formatted(value, name: str):
    """A value as the column ``name`` of the column table shows it: ``{{ e.lambda|formatted:"lambda" }}``."""
    return columns.cell_text(value, columns.column("", name))
