from django import template

from analytics import presentation

register = template.Library()


@register.filter
def cell(value):
    """A table cell outside the column table (analytics.presentation.COLUMNS): a probability or share to 3 decimals,
    a count with thousands grouped, missing values as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return presentation.as_share(value)
    if isinstance(value, int):
        return presentation.as_count(value)
    return value


@register.filter
def column_label(name: str, section: str = "") -> str:
    """A report column's (or a judge metric's) header in words, from the one column table."""
    return presentation.label(name, section)


@register.filter
def formatted(value, name: str):
    """A value as the column ``name`` of the column table shows it: ``{{ e.lambda|formatted:"lambda" }}``."""
    return presentation.cell_text(value, presentation.column("", name))
