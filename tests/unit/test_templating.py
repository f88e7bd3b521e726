"""builder.templating: a template rendered in cached sections gives exactly ``Template.render``'s text
(shipped templates over every shipped and a generated matrix; hand-written templates that use
inheritance, super(), self, macros, assignments, dict methods and values that compare equal across
types), and the cache is used (fewer section renders than variants) only where that is safe."""

from __future__ import annotations

import importlib.util
import itertools
from typing import TYPE_CHECKING, Any

import jinja2
import pytest

from builder import bases, matrix, render, templating
from builder.templating import SECTION_PREFIX, SectionedTemplate, SectionLoader
from tests.conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from builder.models import Variant

IMAGES = ROOT / "images"
RESOLUTION = bases.BaseResolution(upstream={"nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04": "sha256:" + "a" * 64})


def _envs(images: Path, volatile: frozenset[Any] = frozenset()) -> tuple[jinja2.Environment, jinja2.Environment]:
    """(plain Jinja, sectioned) environments with the renderer's options."""
    out = [
        render.jinja_environment(loader)
        for loader in (jinja2.FileSystemLoader(str(images)), SectionLoader(str(images), volatile=volatile))
    ]
    return out[0], out[1]


def _generated_variants() -> list[Variant]:
    spec = importlib.util.spec_from_file_location("render_benchmark", ROOT / "benchmarks" / "render.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return list(bench_matrix(bench))


def bench_matrix(bench: Any) -> tuple[Variant, ...]:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gen.yaml"
        path.write_text(bench.matrix_yaml(["3.10", "3.11", "3.12"], ["ubuntu22.04", "debian12"], ["linux/amd64"]))
        return matrix.load_matrix(path, bases=RESOLUTION).variants


def test_shipped_templates_render_the_same_text_in_sections() -> None:
    paths = [*sorted((ROOT / "matrices").glob("*.yaml")), ROOT / "tests" / "data" / "matrices" / "tiny.yaml"]
    variants = [v for m in matrix.load_matrices(paths, bases=RESOLUTION) for v in m.variants]
    variants += _generated_variants()
    plain_env, sectioned_env = _envs(IMAGES, render._VOLATILE)
    inputs = [
        (f"{v.family}/Dockerfile.j2", render.template_variables(v, RESOLUTION.resolve(v.base.reference)))
        for v in variants
    ]
    names = frozenset(inputs[0][1])
    sectioned = {name: SectionedTemplate(sectioned_env, name, names) for name, _ in inputs}
    for name, variables in inputs:
        assert sectioned[name].render(variables) == plain_env.get_template(name).render(variables), variables["variant"]
    tiny = sectioned["tiny/Dockerfile.j2"]
    renders = sum(1 for name, _ in inputs if name == "tiny/Dockerfile.j2")
    assert all(s.render is not None for s in tiny.sections)
    # the header, the labels and the lock step print the variant's id and labels: cached with holes
    holes = {path for s in tiny.sections for path, _ in s.holes}
    assert holes == {("variant", (True, "id")), ("label_items",)}
    # the keys picked from the paths looked up once a render are each section's own
    for name, variables in inputs:
        template = sectioned[name]
        values = templating._key_values(template._plan, variables)
        assert [pick(values) for pick in template._pickers] == [s.key(variables) for s in template.sections]
    # the Python step was rendered once per Python and OS, not once per variant; the sections with
    # holes once per key and number of labels
    assert all(len(s.cache) < renders for s in tiny.sections), [(s.name, len(s.cache)) for s in tiny.sections]


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


BASE = """\
# {{ title }}
{% if flag %}
flag is {{ flag }}
{% endif %}
{% for k, v in labels.items() %}
{{ k }}={{ v }}
{% endfor %}
items: {{ labels.items() | list | length }} {{ d["key"] }} {{ d.other }}
{% if n %}
n={{ n }}
{% block inner %}inner {{ n }}
{% endblock %}
{% endif %}
{% block tail %}tail {{ title }}
{% endblock %}
"""

CHILD = """\
{% extends "base.j2" %}
{% block inner %}child inner {{ flag }} / {{ super() }}{% endblock %}
{% block tail %}child tail {{ self.inner() }}{% endblock %}
"""

MACROS = """\
{% macro m(x) %}[{{ x }} {{ title }}]{% endmacro %}
{% set local = title ~ "!" %}
{{ m(n) }} {{ local }}
"""

DYNAMIC = """\
{% extends parent %}
{% block tail %}dynamic {{ title }}{% endblock %}
"""

#: a family that names something at its top level (Jinja's "active page" pattern): its blocks and the
#: base's read the name, which only the render that runs the child's top level defines
CHILD_SET = """\
{% extends "base.j2" %}
{% set suffix = title ~ "!" %}
{% from "lib.j2" import shout %}
{% block tail %}child tail {{ suffix }} {{ shout(title) }}{% endblock %}
"""

LIB = """\
{% macro shout(x) %}{{ x | upper }}{% endmacro %}
"""

FILES = {"base.j2": BASE, "child.j2": CHILD, "macros.j2": MACROS, "dynamic.j2": DYNAMIC, "child_set.j2": CHILD_SET}


def _variable_sets() -> list[dict[str, Any]]:
    """Values that compare equal across types (1 == True, "True" vs True) and dicts whose methods
    the template calls: a cache keyed carelessly would mix them up."""
    out = []
    for flag, n, labels, key in itertools.product(
        [True, "True", 1, None], [0, 1, "1"], [{"a": "1"}, {"a": "1", "items": "x"}, {"b": "2"}], ["k1", "k2"]
    ):
        out.append(
            {
                "title": "t",
                "flag": flag,
                "n": n,
                "labels": labels,
                "d": {"key": key, "other": "o"},
                "parent": "base.j2",
            }
        )
    return out


@pytest.mark.parametrize("name", ["base.j2", "child.j2", "macros.j2", "dynamic.j2", "child_set.j2"])
def test_hand_written_templates_render_the_same_text_in_sections(tmp_path: Path, name: str) -> None:
    images = _write(tmp_path, {**FILES, "lib.j2": LIB})
    plain_env, sectioned_env = _envs(images)
    sets = _variable_sets()
    template = SectionedTemplate(sectioned_env, name, frozenset(sets[0]))
    for variables in sets * 2:  # the second round is served from the cache
        assert template.render(variables) == plain_env.get_template(name).render(variables), variables


GLOBALS = """\
{% block head %}{% for i in range(n | int + 1) %}{{ i }}{% endfor %} {{ site }}
{% endblock %}
{% block tail %}{{ title }} {{ site }} {% set ns = namespace(seen=title) %}{{ ns.seen }}
{% endblock %}
"""


def test_jinja_and_environment_globals_reach_every_section(tmp_path: Path) -> None:
    # the render context is built from the template's globals merged once (range, namespace and an
    # environment global), the variables over them: the same names as Template.render's context
    images = _write(tmp_path, {"globals.j2": GLOBALS})
    plain_env, sectioned_env = _envs(images)
    for env in (plain_env, sectioned_env):
        env.globals["site"] = "lab-1"
    sets = _variable_sets()
    template = SectionedTemplate(sectioned_env, "globals.j2", frozenset(sets[0]))
    assert template.sections
    for variables in sets * 2:
        assert template.render(variables) == plain_env.get_template("globals.j2").render(variables), variables


def test_only_what_can_be_keyed_is_cached(tmp_path: Path) -> None:
    images = _write(tmp_path, {**FILES, "lib.j2": LIB})
    _, env = _envs(images)
    names = frozenset(_variable_sets()[0])
    child = SectionedTemplate(env, "child.j2", names)
    by_name = {s.name: s for s in child.sections}
    assert set(by_name) >= {"tail"} and any(n.startswith(SECTION_PREFIX) for n in by_name)
    assert by_name["tail"].render is None  # self.inner(): another block's text
    # the section holding the `inner` block (overridden with super()) is not cached either
    assert any(s.render is None and s.name.startswith(SECTION_PREFIX) for s in child.sections)
    # the labels loop is keyed by the whole dict (labels.items is a method, not the key "items")
    loop = next(s for s in child.sections if ("labels", (True, "items")) in s.paths)
    one = _variable_sets()[0]
    assert loop.render is not None and loop.key(one) == loop.key(dict(one))
    assert loop.key(one) != loop.key({**one, "labels": {"a": "2"}})
    assert loop.key(one) != loop.key({**one, "labels": {"a": "1", "items": "x"}})
    # the inline look-up of `name.attr` reads what _value_at reads: the key's value, the whole dict
    # when the key is missing or names a dict method, the value itself when it is not a dict
    paths = (("d", (True, "key")), ("d", (True, "nope")), ("d", (True, "items")), ("d", (True, "__class__")))
    probe = templating._Section("probe", loop.render, (*paths, ("n", (True, "x")), ("gone", (True, "x"))))
    for variables in (one, {**one, "d": {"items": "i", "__class__": "c"}}, {**one, "d": "text"}):
        want = [templating._value_at(variables, p) for p in probe.paths]
        assert probe.key(variables) == tuple(v if type(v) is str else (repr(v),) for v in want)
    # True, 1 and "True" are three keys (True == 1 in Python; str(True) == "True")
    flag = next(s for s in child.sections if ("flag",) in s.paths and s.render is not None)
    assert len({flag.key({**one, "flag": value}) for value in (True, 1, "True")}) == 3
    # a template that assigns or defines macros, or extends a computed name, is not split; a child that
    # assigns or imports at its top level renders whole too (its names are not the variables')
    assert SectionedTemplate(env, "macros.j2", names).sections == ()
    assert SectionedTemplate(env, "dynamic.j2", names).sections == ()
    assert SectionedTemplate(env, "child_set.j2", names).sections == ()


HOLES = """\
# {{ title }} for {{ v.id }} {braces} {{ "{0}" }} {{ v.kind }}
LABEL {% for k, val in items %}{% if not loop.first %}, {% endif %}{{ k }}="{{ val }}"{% endfor %}
{% for x in names %}[{{ loop.index }}/{{ loop.length }} {{ x }}{{ v.id }}]{% else %}none{% endfor %}
{% if flag %}{{ v.id }} flagged{% endif %}
"""

#: uses of a volatile value other than printing it as it is: each section renders every time
NOT_HOLES = [
    "{{ v.id | upper }}",
    "{% if v.id == 'a{0}b}' %}A{% endif %}",
    "{% if title %}{% filter upper %}{{ v.id }}{% endfilter %}{% endif %}",
    "{{ '%s!' % v.id }}",
    "{{ v }}",
    "{% for k, val in items %}{{ k | upper }}{% endfor %}",
    "{% for k, val in items %}{% if not loop.first %}{{ loop.previtem }}{% endif %}{% endfor %}",
    "{% for k, val in items %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for x in names if x %}{{ x }}{% endfor %}",
    "{% for x in names %}{% for y in names %}{{ y }}{% endfor %}{% endfor %}",
    "{% for x in names %}{% if x %}{{ x }}{% endif %}{% endfor %}",
    "{{ items | length }} {{ items[0][0] }}",
    "{% for k, val in items %}{{ k.upper() }}{% endfor %}",
]


def _volatile_sets() -> list[dict[str, Any]]:
    """Variables whose volatile values differ every time, hold braces and format fields, and
    sometimes are not strings (then the section renders through Jinja)."""
    out = []
    for i, (names, flag) in enumerate(itertools.product([[], ["n{0}"], ["a", "}b{", "c"], ["x", 3]], [True, None])):
        items: list[Any] = [[f"k{j}", f"v{i}{{{j}}}"] for j in range(i % 3 + 1)]
        if i % 4 == 3:
            items.append(("tuple", "pair"))
        vid: object = f"a{{{i}}}b}}" if i != 5 else 5
        out.append({"title": "t{x}", "v": {"id": vid, "kind": "k"}, "items": items, "names": names, "flag": flag})
    return out


@pytest.mark.parametrize("text", [HOLES, *NOT_HOLES])
def test_volatile_values_printed_as_they_are_are_cached_with_holes(tmp_path: Path, text: str) -> None:
    images = _write(tmp_path, {"t.j2": text + "\n{{ title }}\n"})
    volatile = frozenset({("v", (True, "id")), ("items",), ("names",)})
    plain_env, sectioned_env = _envs(images, volatile)
    sets = _volatile_sets()
    template = SectionedTemplate(sectioned_env, "t.j2", frozenset(sets[0]))
    for variables in sets * 2:
        assert template.render(variables) == plain_env.get_template("t.j2").render(variables), variables
    with_holes = [s for s in template.sections if s.holes]
    if text == HOLES:
        assert {p for s in with_holes for p, _ in s.holes} == volatile
        assert all(s.render is not None for s in template.sections)
        # cached: per number of items and names (and the non-string id and names rendered by Jinja)
        assert all(len(s.cache) < len(sets) for s in with_holes)
    else:
        assert not with_holes
        assert template.sections and any(s.render is None for s in template.sections)


def test_a_template_error_is_jinjas(tmp_path: Path) -> None:
    images = _write(tmp_path, {"base.j2": BASE})
    _, env = _envs(images)
    variables = _variable_sets()[0]
    template = SectionedTemplate(env, "base.j2", frozenset(variables))
    del variables["d"]
    with pytest.raises(jinja2.UndefinedError, match="'d' is undefined"):
        template.render(variables)


@pytest.mark.parametrize(
    "text",
    [
        "a\n\n\n\nb\n",
        "\n\na  \n\t\nb",
        "a \n\n \n\nb\t",
        "x\n\n\ny\n\n\n\n\nz\n\n",
        "no newline",
        "",
        "a\r\n\r\n\r\nb",
    ],
)
def test_tidy_gives_the_line_by_line_result(text: str) -> None:
    lines: list[str] = []
    for raw in text.split("\n"):
        line = raw.rstrip(" \t")
        if line or not lines or lines[-1]:
            lines.append(line)
    assert render._tidy(text) == "\n".join(lines).strip("\n") + "\n"


@pytest.mark.parametrize("options", [{"autoescape": True}, {"finalize": lambda value: value}])
def test_volatile_values_through_autoescape_or_finalize_are_rendered_every_time(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """A volatile value printed through autoescaping or ``finalize`` is not cached with holes (the
    filled-in text would skip what those do): every variant gets its own value, as Jinja renders it."""
    images = _write(tmp_path, {"t.j2": "{% block a %}ID {{ v.id }} {{ title }}{% endblock %}\n"})
    volatile = frozenset({("v", (True, "id"))})
    plain, sectioned = (
        jinja2.Environment(loader=loader, **options)
        for loader in (jinja2.FileSystemLoader(str(images)), SectionLoader(str(images), volatile=volatile))
    )
    template = SectionedTemplate(sectioned, "t.j2", frozenset({"v", "title"}))
    for vid in ("a", "b<&>", "a"):
        variables = {"v": {"id": vid}, "title": "x"}
        assert template.render(variables) == plain.get_template("t.j2").render(variables)
    assert not any(s.holes for s in template.sections)
