"""Page templating, one package for every HTML page role-rubric writes (report, compare, compare-judges,
monitor): the Jinja2 templates (templates/, package data), their rendering (`templating`) and the parts every
page draws the same way (`parts`: figures as PNGs, tables). It imports only the foundations: the pages'
packages import it, never the other way.
"""
