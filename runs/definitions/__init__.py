"""The definition API: workflows and their steps declared in Python (Workflow,
StepDef and the step kinds), what a step declares (its impact, retry policy, recovery contract,
approval policy) and what its functions return, the catalogue of registered versions, and the
recovery contracts derived from the declarations alone. Nothing here touches the database: the
rest of the runtime reads these declarations.
"""
