"""Reader for multi-label ARFF files (MULAN and MEKA conventions).

An ARFF file (Weka's Attribute-Relation File Format) has a header of
``@relation``, ``@attribute`` and ``@data`` lines (keywords are
case-insensitive) followed by one instance per line, either dense
(``v1,v2,...``) or sparse (``{index value, index value, ...}`` with
zero-based attribute indices; omitted values are 0, i.e. the first value of a
nominal attribute). ``%`` starts a comment, ``?`` is a missing value, names
and values may be quoted with ``'`` or ``"``.

Multi-label files store the labels as attributes:

* MULAN puts the labels anywhere (usually last) and names them in a
  companion XML file (``<labels><label name="..."/>...</labels>``, possibly
  nested for hierarchies);
* MEKA puts ``-C L`` in the ``@relation`` name: the first ``L`` attributes
  are the labels, or the last ``|L|`` when ``L`` is negative.

Label attributes must be numeric or nominal with the values ``{0, 1}``;
feature attributes numeric (``numeric``, ``real``, ``integer``) or nominal,
nominal ones encoded by the index of their value in the declaration.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpurpo._validation import check_choice, check_int
from gpurpo.datasets._base import MultiLabelDataset, open_text, source_name

__all__ = ["load_arff"]

_MEKA_C = re.compile(r"(?:^|\s|['\"])-C\s+(-?\d+)")
_NUMERIC_TYPES = ("numeric", "real", "integer")


@dataclass
class _Attribute:
    name: str
    line: int
    nominal: list[str] | None = None
    codes: dict[str, int] = field(default_factory=dict)


class _Error(ValueError):
    """Parse error carrying the line number (re-raised with the file name)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


# --------------------------------------------------------------------------
# Tokenising
# --------------------------------------------------------------------------


def _strip_comment(text: str) -> str:
    """Remove a ``%`` comment that is not inside quotes."""
    if "%" not in text:
        return text
    if "'" not in text and '"' not in text:
        return text.split("%", 1)[0]
    quote = None
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "%":
            return text[:i]
    return text


def _split_raw(text: str, line: int) -> list[str]:
    """Split on top-level commas, keeping quotes; tokens are stripped."""
    if "'" not in text and '"' not in text:
        return [t.strip() for t in text.split(",")]
    tokens = []
    start = 0
    quote = None
    escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            tokens.append(text[start:i].strip())
            start = i + 1
    if quote is not None:
        raise _Error(line, f"expected a closing {quote} quote")
    tokens.append(text[start:].strip())
    return tokens


def _unquote(token: str, line: int) -> str:
    """Remove surrounding quotes and backslash escapes."""
    if len(token) >= 1 and token[0] in "'\"":
        quote = token[0]
        if len(token) < 2 or token[-1] != quote:
            raise _Error(line, f"expected a closing {quote} quote in {token!r}")
        body = token[1:-1]
        if "\\" in body:
            body = re.sub(r"\\(.)", r"\1", body)
        return body
    return token


def _leading_token(text: str, line: int) -> tuple[str, str]:
    """Split ``text`` into its first (possibly quoted) token and the rest."""
    text = text.lstrip()
    if not text:
        raise _Error(line, "expected a name")
    if text[0] in "'\"":
        quote = text[0]
        i = 1
        while i < len(text):
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == quote:
                return _unquote(text[: i + 1], line), text[i + 1 :]
            i += 1
        raise _Error(line, f"expected a closing {quote} quote in the name")
    parts = text.split(None, 1)
    return parts[0], (parts[1] if len(parts) > 1 else "")


# --------------------------------------------------------------------------
# Header
# --------------------------------------------------------------------------


def _parse_attribute(rest: str, line: int) -> _Attribute:
    name, spec = _leading_token(rest, line)
    spec = spec.strip()
    if not spec:
        raise _Error(line, f"expected a type after the attribute name {name!r}")
    if spec.startswith("{"):
        if not spec.endswith("}"):
            raise _Error(line, f"expected '}}' closing the nominal values of {name!r}")
        values = [_unquote(t, line) for t in _split_raw(spec[1:-1], line)]
        if any(v == "" for v in values):
            raise _Error(line, f"empty nominal value in the declaration of {name!r}")
        if len(set(values)) < len(values):
            seen: set[str] = set()
            repeated = next(v for v in values if v in seen or seen.add(v))
            raise _Error(
                line, f"nominal value {repeated!r} declared twice for attribute {name!r}"
            )
        attr = _Attribute(name, line, nominal=values)
        attr.codes = {v: i for i, v in enumerate(values)}
        return attr
    kind = spec.split(None, 1)[0].lower()
    if kind in _NUMERIC_TYPES:
        return _Attribute(name, line)
    if kind in ("string", "date", "relational"):
        raise _Error(
            line,
            f"attribute {name!r} has type {kind}; only numeric and nominal attributes "
            "are supported",
        )
    raise _Error(
        line, f"expected an attribute type (numeric, real, integer or {{...}}), got {spec!r}"
    )


def _parse_header(lines: Any) -> tuple[str, list[_Attribute], int]:
    relation = None
    attributes: list[_Attribute] = []
    first_line: dict[str, int] = {}
    for number, raw in lines:
        text = _strip_comment(raw).strip()
        if not text:
            continue
        lower = text.lower()
        if lower.startswith("@relation") and (len(text) == 9 or text[9].isspace()):
            if relation is not None:
                raise _Error(number, "expected a single @relation line")
            relation = text[9:].strip()
        elif lower.startswith("@attribute") and len(text) > 10 and text[10].isspace():
            if relation is None:
                raise _Error(number, "expected @relation before the first @attribute")
            attr = _parse_attribute(text[10:], number)
            if attr.name in first_line:
                raise _Error(
                    number,
                    f"attribute {attr.name!r} declared twice (first on line "
                    f"{first_line[attr.name]})",
                )
            first_line[attr.name] = number
            attributes.append(attr)
        elif lower == "@data":
            if not attributes:
                raise _Error(number, "expected @attribute declarations before @data")
            return relation, attributes, number
        else:
            raise _Error(number, f"expected @relation, @attribute or @data, got {text[:60]!r}")
    raise _Error(0, "expected an @data line; the file ended in the header")


# --------------------------------------------------------------------------
# Label positions
# --------------------------------------------------------------------------


def _xml_label_names(xml: Any) -> list[str]:
    with open_text(xml, "xml") as fh:
        try:
            root = ET.parse(fh).getroot()
        except ET.ParseError as exc:
            raise ValueError(f"xml: {source_name(xml)} is not well-formed XML: {exc}") from None
    names = [
        el.attrib["name"]
        for el in root.iter()
        if el.tag.rsplit("}", 1)[-1] == "label" and "name" in el.attrib
    ]
    if not names:
        raise ValueError(f"xml: {source_name(xml)} declares no <label name=...> element")
    return names


def _label_indices(
    relation: str,
    attributes: list[_Attribute],
    n_labels: int | None,
    label_location: str,
    xml: Any,
) -> list[int]:
    n_attr = len(attributes)
    if xml is not None:
        if n_labels is not None:
            raise ValueError("give either xml (MULAN) or n_labels, not both")
        names = _xml_label_names(xml)
        position = {a.name: i for i, a in enumerate(attributes)}
        missing = [nm for nm in names if nm not in position]
        if missing:
            raise ValueError(
                f"xml: labels {missing[:5]} are not attributes of the ARFF file "
                f"({len(missing)} missing)"
            )
        return sorted(position[nm] for nm in set(names))
    if n_labels is not None:
        count = check_int(n_labels, "n_labels", low=1, high=n_attr)
        start = label_location == "start"
    else:
        match = _MEKA_C.search(relation)
        if match is None:
            raise ValueError(
                "cannot tell which attributes are labels: pass n_labels (with "
                "label_location), or xml for a MULAN file, or use a MEKA file whose "
                f"@relation holds '-C <number of labels>'; got @relation {relation!r}"
            )
        value = int(match.group(1))
        if value == 0 or abs(value) > n_attr:
            raise ValueError(
                f"@relation gives -C {value}, expected a nonzero label count of at most "
                f"the {n_attr} attributes"
            )
        count, start = abs(value), value > 0
    return list(range(count)) if start else list(range(n_attr - count, n_attr))


def _check_label_attributes(attributes: list[_Attribute], labels: list[int]) -> None:
    for j in labels:
        attr = attributes[j]
        if attr.nominal is not None and sorted(attr.nominal) != ["0", "1"]:
            raise _Error(
                attr.line,
                f"label attribute {attr.name!r} must be numeric or nominal {{0,1}}, "
                f"got {{{','.join(attr.nominal)}}}",
            )


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


class _Converter:
    """Turns value strings into floats (numbers, nominal codes, NaN for '?')."""

    def __init__(self, attributes: list[_Attribute]) -> None:
        self.attributes = attributes
        self.nominal = [a.codes if a.nominal is not None else None for a in attributes]
        self.numeric_codes = all(
            a.nominal is None or all(_is_number(v, i) for i, v in enumerate(a.nominal))
            for a in attributes
        )
        self.nominal_columns = np.array(
            [j for j, a in enumerate(attributes) if a.nominal is not None], dtype=np.int64
        )
        self.nominal_sizes = np.array(
            [len(a.nominal) for a in attributes if a.nominal is not None], dtype=np.float64
        )

    def fast_row(self, tokens: list[str]) -> np.ndarray | None:
        """Parse a row of plain numbers at once; None when a token needs care."""
        try:
            row = np.array(tokens, dtype=np.float64)
        except ValueError:
            return None
        codes = row[self.nominal_columns]
        valid = (codes == np.floor(codes)) & (codes >= 0) & (codes < self.nominal_sizes)
        return row if bool(valid.all()) else None

    def value(self, j: int, token: str, line: int) -> float:
        token = _unquote(token, line) if token[:1] in "'\"" else token
        if token == "?":
            return math.nan
        codes = self.nominal[j]
        if codes is None:
            try:
                return float(token)
            except ValueError:
                raise _Error(
                    line,
                    f"expected a number for attribute {self.attributes[j].name!r}, "
                    f"got {token!r}",
                ) from None
        code = codes.get(token)
        if code is None:
            allowed = ",".join(self.attributes[j].nominal or [])
            raise _Error(
                line,
                f"expected one of {{{allowed}}} for attribute "
                f"{self.attributes[j].name!r}, got {token!r}",
            )
        return float(code)


def _is_number(text: str, expected: int) -> bool:
    try:
        return float(text) == expected
    except ValueError:
        return False


def _dense_row(text: str, line: int, conv: _Converter, n_attr: int) -> np.ndarray:
    tokens = _split_raw(text, line)
    if len(tokens) != n_attr:
        raise _Error(line, f"expected {n_attr} comma-separated values, got {len(tokens)}")
    if conv.numeric_codes and "'" not in text and '"' not in text:
        row = conv.fast_row(tokens)
        if row is not None:
            return row
    return np.array([conv.value(j, t, line) for j, t in enumerate(tokens)])


def _sparse_row(
    text: str, line: int, conv: _Converter, n_attr: int
) -> tuple[list[int], list[float]]:
    if not text.endswith("}"):
        raise _Error(line, "expected '}' closing the sparse instance")
    body = text[1:-1].strip()
    cols: list[int] = []
    vals: list[float] = []
    if not body:
        return cols, vals
    for item in _split_raw(body, line):
        parts = item.split(None, 1)
        if len(parts) != 2:
            raise _Error(line, f"expected 'index value' in a sparse instance, got {item!r}")
        try:
            j = int(parts[0])
        except ValueError:
            raise _Error(line, f"expected an attribute index, got {parts[0]!r}") from None
        if not 0 <= j < n_attr:
            raise _Error(line, f"expected an attribute index in [0, {n_attr}), got {j}")
        cols.append(j)
        vals.append(conv.value(j, parts[1].strip(), line))
    if len(set(cols)) != len(cols):
        raise _Error(line, "expected each attribute index at most once in a sparse instance")
    return cols, vals


def _parse_data(
    lines: Any, attributes: list[_Attribute]
) -> tuple[list[np.ndarray], list[tuple[int, list[int], list[float]]], list[int]]:
    """Parse the instances: dense rows, sparse (row, columns, values), line numbers."""
    conv = _Converter(attributes)
    n_attr = len(attributes)
    dense: list[np.ndarray] = []
    sparse: list[tuple[int, list[int], list[float]]] = []
    line_numbers: list[int] = []
    for number, raw in lines:
        text = _strip_comment(raw).strip()
        if not text:
            continue
        if text[0] == "@":
            raise _Error(number, f"expected an instance after @data, got {text[:40]!r}")
        row = len(line_numbers)
        line_numbers.append(number)
        if text[0] == "{":
            cols, vals = _sparse_row(text, number, conv, n_attr)
            sparse.append((row, cols, vals))
        else:
            dense.append(_dense_row(text, number, conv, n_attr))
    return dense, sparse, line_numbers


def _sparse_defaults(attributes: list[_Attribute], labels: list[int]) -> np.ndarray:
    """Value of an omitted entry of a sparse instance for each attribute.

    Omitted values are 0 (code 0 for nominal attributes); for a label declared
    ``{1,0}`` code 0 means the label value 1.
    """
    defaults = np.zeros(len(attributes))
    for j in labels:
        nominal = attributes[j].nominal
        if nominal is not None and nominal[0] == "1":
            defaults[j] = 1.0
    return defaults


def _label_values_from_codes(
    block: Any, attributes: list[_Attribute], labels: list[int]
) -> Any:
    """Map nominal codes of label columns to their 0/1 values (dense block)."""
    for k, j in enumerate(labels):
        nominal = attributes[j].nominal
        if nominal is not None and nominal[0] == "1":
            col = block[:, k]
            block[:, k] = np.where(np.isnan(col), col, 1.0 - col)
    return block


def _check_labels_binary(
    values: np.ndarray,
    rows: np.ndarray,
    line_numbers: list[int],
    names: list[str],
    cols: np.ndarray,
) -> None:
    """Raise at the first label entry that is not 0 or 1 (``rows``/``cols`` locate it)."""
    bad = ~((values == 0.0) | (values == 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        shown = "?" if np.isnan(values[i]) else repr(float(values[i]))
        raise _Error(
            line_numbers[int(rows[i])],
            f"expected 0 or 1 for label {names[int(cols[i])]!r}, got {shown}",
        )


def _assemble(
    dense: list[np.ndarray],
    sparse: list[tuple[int, list[int], list[float]]],
    line_numbers: list[int],
    attributes: list[_Attribute],
    labels: list[int],
) -> tuple[Any, Any]:
    n = len(line_numbers)
    n_attr = len(attributes)
    is_label = np.zeros(n_attr, dtype=bool)
    is_label[labels] = True
    features = np.flatnonzero(~is_label)
    new_index = np.empty(n_attr, dtype=np.int64)
    new_index[features] = np.arange(features.size)
    new_index[labels] = np.arange(len(labels))
    label_names = [attributes[j].name for j in labels]

    if not sparse:
        data = np.vstack(dense) if dense else np.empty((0, n_attr))
        X = np.ascontiguousarray(data[:, features])
        L = _label_values_from_codes(data[:, labels].copy(), attributes, labels)
        bad_rows, bad_cols = np.nonzero(~((L == 0.0) | (L == 1.0)))
        _check_labels_binary(
            L[bad_rows, bad_cols], bad_rows, line_numbers, label_names, bad_cols
        )
        Y = sp.csr_matrix(L)
        Y.sort_indices()
        return X, Y

    row_ids: list[np.ndarray] = []
    col_ids: list[np.ndarray] = []
    values: list[np.ndarray] = []
    dense_rows = sorted(set(range(n)) - {r for r, _, _ in sparse})
    for r, vec in zip(dense_rows, dense):
        row_ids.append(np.full(n_attr, r))
        col_ids.append(np.arange(n_attr))
        values.append(vec)
    defaults = _sparse_defaults(attributes, labels)
    default_cols = np.flatnonzero(defaults)
    for r, cols_r, vals_r in sparse:
        c = np.asarray(cols_r, dtype=np.int64)
        v = np.asarray(vals_r, dtype=np.float64)
        if default_cols.size:
            extra = np.setdiff1d(default_cols, c)
            c = np.concatenate([c, extra])
            v = np.concatenate([v, np.zeros(extra.size)])
        row_ids.append(np.full(c.size, r))
        col_ids.append(c)
        values.append(v)
    rows = np.concatenate(row_ids) if row_ids else np.empty(0, dtype=np.int64)
    cols = np.concatenate(col_ids) if col_ids else np.empty(0, dtype=np.int64)
    vals = np.concatenate(values) if values else np.empty(0)

    in_label = is_label[cols]
    lab_rows, lab_cols, lab_vals = rows[in_label], new_index[cols[in_label]], vals[in_label]
    flip = np.array(
        [attributes[j].nominal is not None and attributes[j].nominal[0] == "1" for j in labels],
        dtype=bool,
    )
    flipped = flip[lab_cols] & ~np.isnan(lab_vals)
    lab_vals = np.where(flipped, 1.0 - lab_vals, lab_vals)
    _check_labels_binary(lab_vals, lab_rows, line_numbers, label_names, lab_cols)
    keep = lab_vals != 0.0
    Y = sp.csr_matrix(
        (lab_vals[keep], (lab_rows[keep], lab_cols[keep])), shape=(n, len(labels))
    )
    feat = ~in_label & (vals != 0.0)
    X = sp.csr_matrix(
        (vals[feat], (rows[feat], new_index[cols[feat]])), shape=(n, features.size)
    )
    X.sort_indices()
    Y.sort_indices()
    return X, Y


def load_arff(
    path: Any,
    n_labels: int | None = None,
    label_location: str = "end",
    xml: Any = None,
) -> MultiLabelDataset:
    """Load a multi-label ARFF file (MULAN or MEKA).

    Which attributes are labels is decided, in this order, by ``xml`` (MULAN:
    the attributes named in the XML file), by ``n_labels`` with
    ``label_location``, or by ``-C L`` in the ``@relation`` line (MEKA: first
    ``L`` attributes, or last ``|L|`` when ``L < 0``).

    Parameters
    ----------
    path : str, os.PathLike or file-like object
        The ARFF file (text or binary stream, UTF-8).
    n_labels : int, optional
        Number of label attributes, at the position given by
        ``label_location``.
    label_location : {"end", "start"}, default="end"
        Where the ``n_labels`` labels are (MULAN files usually put them last,
        MEKA files first). Used only with ``n_labels``.
    xml : str, os.PathLike or file-like object, optional
        MULAN's companion XML file naming the labels.

    Returns
    -------
    MultiLabelDataset
        ``X``: dense ndarray for dense files, CSR for sparse files (missing
        values ``?`` are NaN; nominal features are their value's index);
        ``Y``: CSR 0/1 matrix whose columns follow the order of the label
        attributes in the file; ``feature_names``, ``label_names``.

    Raises
    ------
    ValueError
        For malformed files, with the line number and what was expected.
    """
    check_choice(label_location, "label_location", ("end", "start"))
    name = source_name(path)
    try:
        with open_text(path, "path") as fh:
            lines = _numbered(fh)
            relation, attributes, _ = _parse_header(lines)
            labels = _label_indices(relation, attributes, n_labels, label_location, xml)
            _check_label_attributes(attributes, labels)
            dense, sparse, line_numbers = _parse_data(lines, attributes)
        X, Y = _assemble(dense, sparse, line_numbers, attributes, labels)
    except _Error as exc:
        where = f"line {exc.line}" if exc.line else "end of file"
        raise ValueError(f"{name}, {where}: {exc.message}") from None
    label_set = set(labels)
    feature_names = [a.name for j, a in enumerate(attributes) if j not in label_set]
    label_names = [attributes[j].name for j in labels]
    return MultiLabelDataset(X, Y, feature_names, label_names)


def _numbered(fh: Any) -> Any:
    """Iterate over (line number, text) pairs, dropping a UTF-8 byte-order mark."""
    for number, raw in enumerate(fh, start=1):
        if number == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]
        yield number, raw.rstrip("\r\n")
