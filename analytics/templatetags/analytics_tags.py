from django import template

register = template.Library()


@register.filter
def cell(value):
    """Table cells: floats to 3 decimals, missing values as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return value
