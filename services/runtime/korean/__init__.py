"""Korean values read by code, not by a model: amounts of money (amounts.py) and dates (dates.py).

Shared by the reasoning service (tool arguments checked against what the user wrote) and the
gateway's features; pure functions over text and a reference date.
"""
