"""Agent steps: the loop that asks the model for its next turn and runs the tool
calls it asks for, one at a time and checkpointed like any step's effect; the conversation kept
within its context budget; an operator's undo of one tool call. The loop reaches the state
machine only through the transitions' public functions (an import contract checks it).
"""
