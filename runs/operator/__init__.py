"""What a person does to a run: the operator actions defined once (the console,
its bulk actions, the API and the CLI read that table), reconciliation by key, the smallest safe
next action in words, the read-only investigation card, and the drill kit that breaks a
workflow at each step boundary before it goes to production.
"""
