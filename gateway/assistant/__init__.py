"""The career assistant (issue 61): sessions whose turns search, call tools on the server and answer."""
