"""The config foundations: what a config value must be, written once beside the setting it describes
(`settings`: `setting(default, doc, rule)`, the rules and their checks), and a value printed back for the
shell and Hydra (`command_line`). It imports only the foundations; the judge's settings
(rubric/judge/settings.py) and every command's schema (calibration/schema/) are built on it.
"""
