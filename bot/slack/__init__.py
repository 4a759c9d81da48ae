"""The Slack app: a thin layer that turns Slack events into service calls and answers.

`create_app(settings)` builds the bolt app; `bot.slack.serve` runs it (Socket Mode or HTTP).
Only this package imports slack_bolt / slack_sdk.
"""
