"""Parts of a JSON column, taken by the database: the expressions behind the store's json_*
methods (runs.store.base.Store). A page that shows a bounded part of a large JSON value
(a bulk job's request lists 50 of its runs at a time) reads that part, not the whole value.

A path is a tuple of object keys, ("params", "runs"). Each class writes SQLite's JSON1 SQL
(as_sql) and PostgreSQL's jsonb SQL (as_postgresql); Django picks one by the connection."""

import json

from django.db.models import Expression, Func, IntegerField, JSONField


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "$" + "".join(f'."{key}"' for key in path)


def _compiled(compiler, expression) -> tuple[str, list]:
    sql, params = compiler.compile(expression)
    return sql, list(params)


class JsonArrayLength(Func):
    """How many items the array at `path` of a JSON expression holds; NULL where it holds
    none there."""

    output_field = IntegerField()

    def __init__(self, expression, path: tuple[str, ...]):
        super().__init__(expression)
        self.path = path

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        return f"JSON_ARRAY_LENGTH({sql}, %s)", [*params, _sqlite_path(self.path)]

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        return (f"(SELECT CASE WHEN JSONB_TYPEOF(part.value) = 'array' THEN "
                f"JSONB_ARRAY_LENGTH(part.value) END FROM (SELECT ({sql}) #> %s::text[] "
                f"AS value) AS part)", [*params, list(self.path)])


class JsonArrayPart(Func):
    """Of the array at `path` of a JSON expression, as a JSON array in their order: the
    items `start` (from 0) to `stop` (not included), or, given `heads`, the text items
    whose part before their first ':' is one of them (all of it, for one without). [] where
    no item is taken, or nothing is there."""

    output_field = JSONField()

    def __init__(self, expression, path: tuple[str, ...], *, start: int = 0,
                 stop: int | None = None, heads: list[str] | None = None):
        super().__init__(expression)
        self.path, self.start, self.stop, self.heads = path, start, stop, heads

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        params.append(_sqlite_path(self.path))
        if self.heads is not None:
            where = ("(CASE WHEN INSTR(value, ':') > 0 THEN SUBSTR(value, 1, INSTR(value, ':')"
                     " - 1) ELSE value END) IN (SELECT value FROM JSON_EACH(%s))")
            params.append(json.dumps(self.heads))
        else:
            where = "key >= %s AND key < %s"
            params += [self.start, self.stop if self.stop is not None else 2 ** 62]
        # json() keeps an object or an array an item, not its text.
        return (f"(SELECT JSON_GROUP_ARRAY(CASE WHEN type IN ('object', 'array') THEN "
                f"JSON(value) ELSE value END) FROM (SELECT value, type FROM JSON_EACH({sql}, "
                f"%s) WHERE {where} ORDER BY key))", params)

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        params.append(list(self.path))
        if self.heads is not None:
            where = "SPLIT_PART(item #>> '{}', ':', 1) = ANY(%s::text[])"
            params.append(list(self.heads))
        else:
            where = "number > %s AND number <= %s"
            params += [self.start, self.stop if self.stop is not None else 2 ** 62]
        # The function in FROM reads the part before it (implicitly LATERAL).
        return (f"(SELECT COALESCE(JSONB_AGG(item ORDER BY number), '[]'::jsonb) FROM "
                f"(SELECT ({sql}) #> %s::text[] AS value) AS part, JSONB_ARRAY_ELEMENTS("
                f"CASE WHEN JSONB_TYPEOF(part.value) = 'array' THEN part.value ELSE "
                f"'[]'::jsonb END) WITH ORDINALITY AS items(item, number) WHERE {where})",
                params)


class JsonWith(Func):
    """A JSON expression with the values at some paths replaced (`replaced`: path ->
    expression, or a value to store as JSON) and the keys at others removed (`removed`),
    every other key where it was."""

    output_field = JSONField()

    def __init__(self, expression, *, replaced: dict | None = None, removed=()):
        self.replaced = list((replaced or {}).items())
        values = [v for _, v in self.replaced if isinstance(v, Expression)]
        super().__init__(expression, *values)
        self.removed = tuple(removed)

    def _values(self, compiler):
        expressions = iter(self.source_expressions[1:])
        for path, value in self.replaced:
            if isinstance(value, Expression):
                yield path, *_compiled(compiler, next(expressions))
            else:
                yield path, "%s", [json.dumps(value)]

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        if self.removed:
            sql = f"JSON_REMOVE({sql}, {', '.join(['%s'] * len(self.removed))})"
            params += [_sqlite_path(path) for path in self.removed]
        for path, value_sql, value_params in self._values(compiler):
            sql = f"JSON_SET({sql}, %s, JSON({value_sql}))"
            params += [_sqlite_path(path), *value_params]
        return sql, params

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = _compiled(compiler, self.source_expressions[0])
        for path in self.removed:
            sql = f"(({sql}) #- %s::text[])"
            params.append(list(path))
        for path, value_sql, value_params in self._values(compiler):
            sql = f"JSONB_SET({sql}, %s::text[], ({value_sql})::jsonb)"
            params += [list(path), *value_params]
        return sql, params
