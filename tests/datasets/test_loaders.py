"""ARFF (MULAN / MEKA) and XMC loaders on small files written by the tests."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.io import arff as scipy_arff
from sklearn.datasets import load_svmlight_file

from gpurpo.datasets import MultiLabelDataset, load_arff, load_xmc

# --------------------------------------------------------------------------
# ARFF
# --------------------------------------------------------------------------

MULAN_DENSE = """\
% a MULAN-style file: labels last, names in the XML file
@relation emotions-mini

@attribute f1 numeric
@attribute 'f two' REAL
@attribute "colour" {red,green,blue}
@attribute amazed {0,1}
@attribute happy {0,1}

@data
0.5,1.25,green,1,0
-1,2e-3,red,0,0   % trailing comment
% a comment line between instances

3,?,blue,1,1
"""

MULAN_XML = """\
<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
  <label name="amazed"></label>
  <label name="happy"></label>
</labels>
"""

X_MULAN = np.array([[0.5, 1.25, 1.0], [-1.0, 2e-3, 0.0], [3.0, np.nan, 2.0]])
Y_MULAN = np.array([[1, 0], [0, 0], [1, 1]])


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _assert_dense_equal(actual, expected):
    actual = actual.toarray() if sp.issparse(actual) else np.asarray(actual)
    np.testing.assert_array_equal(actual, expected)


def test_mulan_dense_with_xml(tmp_path):
    arff = _write(tmp_path, "emotions.arff", MULAN_DENSE)
    xml = _write(tmp_path, "emotions.xml", MULAN_XML)
    data = load_arff(arff, xml=xml)
    assert isinstance(data, MultiLabelDataset)
    X, Y, feature_names, label_names = data
    assert isinstance(X, np.ndarray) and X.dtype == np.float64
    _assert_dense_equal(X, X_MULAN)
    assert sp.issparse(Y) and Y.format == "csr"
    _assert_dense_equal(Y, Y_MULAN)
    assert feature_names == ["f1", "f two", "colour"]
    assert label_names == ["amazed", "happy"]


def test_mulan_dense_same_as_n_labels_and_as_scipy(tmp_path):
    arff = _write(tmp_path, "emotions.arff", MULAN_DENSE)
    X, Y, _, _ = load_arff(str(arff), n_labels=2)
    _assert_dense_equal(X, X_MULAN)
    _assert_dense_equal(Y, Y_MULAN)
    # scipy's reader as an independent reference for the numeric columns
    # (scipy does not accept trailing comments)
    plain = MULAN_DENSE.replace("   % trailing comment", "")
    records, _ = scipy_arff.loadarff(io.StringIO(plain))
    np.testing.assert_array_equal(X[:, 0], records["f1"])
    np.testing.assert_array_equal(X[:, 1], records["f two"])
    np.testing.assert_array_equal(Y[:, 0].toarray().ravel(), records["amazed"].astype(float))


def test_xml_labels_anywhere_and_hierarchical(tmp_path):
    text = """@RELATION r
@ATTRIBUTE lab_a {0,1}
@ATTRIBUTE x NUMERIC
@ATTRIBUTE lab_b numeric
@ATTRIBUTE z integer
@DATA
1,0.5,0,7
0,1.5,1,8
"""
    xml = """<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="lab_b"><label name="lab_a"></label></label></labels>"""
    X, Y, fn, ln = load_arff(io.StringIO(text), xml=io.StringIO(xml))
    assert fn == ["x", "z"] and ln == ["lab_a", "lab_b"]
    _assert_dense_equal(X, [[0.5, 7.0], [1.5, 8.0]])
    _assert_dense_equal(Y, [[1, 0], [0, 1]])


MEKA_START = """\
@relation 'Mini: -C 3 -split-percentage 66'
@attribute L1 {0,1}
@attribute L2 {0,1}
@attribute L3 {0,1}
@attribute a numeric
@attribute b numeric
@data
1,0,1,0.1,0.2
0,0,0,0.3,0.4
0,1,1,0.5,0.6
"""


def test_meka_labels_first(tmp_path):
    X, Y, fn, ln = load_arff(_write(tmp_path, "m.arff", MEKA_START))
    assert ln == ["L1", "L2", "L3"] and fn == ["a", "b"]
    _assert_dense_equal(X, [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    _assert_dense_equal(Y, [[1, 0, 1], [0, 0, 0], [0, 1, 1]])


def test_meka_negative_c_means_labels_last():
    text = """@relation "Mini: -C -2"
@attribute a numeric
@attribute L1 {0,1}
@attribute L2 numeric
@data
0.5,1,0
1.5,0,1
"""
    X, Y, fn, ln = load_arff(io.BytesIO(text.encode()))
    assert ln == ["L1", "L2"] and fn == ["a"]
    _assert_dense_equal(X, [[0.5], [1.5]])
    _assert_dense_equal(Y, [[1, 0], [0, 1]])


def test_explicit_n_labels_at_start_overrides_nothing_else(tmp_path):
    X, Y, fn, ln = load_arff(
        _write(tmp_path, "m.arff", MEKA_START), n_labels=2, label_location="start"
    )
    assert ln == ["L1", "L2"] and fn == ["L3", "a", "b"]
    _assert_dense_equal(Y, [[1, 0], [0, 0], [0, 1]])


SPARSE = """\
@relation 'sparse-mini: -C -3'
@attribute w0 numeric
@attribute w1 numeric
@attribute 'w 2' {low,high}
@attribute w3 numeric
@attribute y0 {0,1}
@attribute y1 {0,1}
@attribute y2 {0,1}
@data
{0 1.5, 4 1, 6 1}
{}
{1 2,2 high,3 -0.5 , 5 1}   % trailing comment
% comment
{3 ?, 4 1, 5 1, 6 1}
"""


def test_sparse_arff():
    X, Y, fn, ln = load_arff(io.StringIO(SPARSE))
    assert sp.issparse(X) and X.format == "csr"
    assert sp.issparse(Y) and Y.format == "csr"
    assert fn == ["w0", "w1", "w 2", "w3"] and ln == ["y0", "y1", "y2"]
    expected_X = np.array(
        [[1.5, 0, 0, 0], [0, 0, 0, 0], [0, 2.0, 1.0, -0.5], [0, 0, 0, np.nan]]
    )
    _assert_dense_equal(X, expected_X)
    _assert_dense_equal(Y, [[1, 0, 1], [0, 0, 0], [0, 1, 0], [1, 1, 1]])


def test_sparse_equals_dense_version():
    dense_text = """@relation 'd: -C -3'
@attribute w0 numeric
@attribute w1 numeric
@attribute 'w 2' {low,high}
@attribute w3 numeric
@attribute y0 {0,1}
@attribute y1 {0,1}
@attribute y2 {0,1}
@data
1.5,0,low,0,1,0,1
0,0,low,0,0,0,0
0,2,high,-0.5,0,1,0
0,0,low,?,1,1,1
"""
    Xs, Ys, _, _ = load_arff(io.StringIO(SPARSE))
    Xd, Yd, _, _ = load_arff(io.StringIO(dense_text))
    _assert_dense_equal(Xs, Xd)
    _assert_dense_equal(Ys, Yd.toarray())


def test_label_declared_one_zero_and_omitted_in_sparse_rows():
    # omitted sparse values take the first nominal value: here label value 1
    text = """@relation r
@attribute x numeric
@attribute lab {1,0}
@data
{0 2}
{0 3, 1 0}
"""
    X, Y, _, _ = load_arff(io.StringIO(text), n_labels=1)
    _assert_dense_equal(X, [[2.0], [3.0]])
    _assert_dense_equal(Y, [[1], [0]])
    dense = "@relation r\n@attribute x numeric\n@attribute lab {1,0}\n@data\n2,1\n3,0\n"
    _assert_dense_equal(load_arff(io.StringIO(dense), n_labels=1).Y, [[1], [0]])


def test_quoted_values_nominal_codes_and_case_insensitive_keywords():
    text = """@RELATION "quoted"
@Attribute "a b" {'x y',"z,w",plain}
@ATTRIBUTE 'it is' Numeric
@attribute 'c\\'q' numeric
@attribute lab {0,1}
@Data
'z,w', 1, 2, '1'
"x y",3,4,0
plain,5,6,"0"
"""
    X, Y, fn, ln = load_arff(io.StringIO(text), n_labels=1)
    assert fn[0] == "a b" and fn[2] == "c'q"
    _assert_dense_equal(X, [[1, 1, 2], [0, 3, 4], [2, 5, 6]])
    _assert_dense_equal(Y, [[1], [0], [0]])


def test_path_str_and_file_objects_agree(tmp_path):
    path = _write(tmp_path, "m.arff", MEKA_START)
    results = [
        load_arff(path),
        load_arff(str(path)),
        load_arff(io.StringIO(MEKA_START)),
        load_arff(io.BytesIO(MEKA_START.encode())),
    ]
    with open(path, "rb") as fh:
        results.append(load_arff(fh))
    for X, Y, fn, ln in results[1:]:
        _assert_dense_equal(X, results[0].X)
        _assert_dense_equal(Y, results[0].Y.toarray())
        assert (fn, ln) == (results[0].feature_names, results[0].label_names)


@pytest.mark.parametrize(
    "text,kwargs,match",
    [
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n1,0\n2\n",
         dict(n_labels=1), r"line 6: expected 2 comma-separated values, got 1"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\nx,0\n",
         dict(n_labels=1), r"line 5: expected a number for attribute 'a', got 'x'"),
        ("@relation r\n@attribute a {u,v}\n@attribute l {0,1}\n@data\nu,0\nw,1\n",
         dict(n_labels=1), r"line 6: expected one of \{u,v\} for attribute 'a', got 'w'"),
        ("@relation r\n@attribute a numeric\n@attribute l numeric\n@data\n1,0\n1,2\n",
         dict(n_labels=1), r"line 6: expected 0 or 1 for label 'l', got 2.0"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n1,?\n",
         dict(n_labels=1), r"line 5: expected 0 or 1 for label 'l', got \?"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n1,0\n",
         dict(n_labels=1), r"line 4: expected @relation, @attribute or @data"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n",
         dict(n_labels=1), r"end of file: expected an @data line"),
        ("@relation r\n@attribute a string\n@attribute l {0,1}\n@data\n",
         dict(n_labels=1), r"line 2: attribute 'a' has type string"),
        ("@relation r\n@attribute a numeric\n@attribute l {yes,no}\n@data\n",
         dict(n_labels=1), r"line 3: label attribute 'l' must be numeric or nominal \{0,1\}"),
        ("@relation r\n@attribute a {u,v\n@attribute l {0,1}\n@data\n",
         dict(n_labels=1), r"line 2: expected '\}' closing the nominal values of 'a'"),
        ("@relation r\n@attribute 'a numeric\n@data\n",
         dict(n_labels=1), r"line 2: expected a closing ' quote"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n{0 1, 5 1}\n",
         dict(n_labels=1), r"line 5: expected an attribute index in \[0, 2\), got 5"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n{0 1, 1 1\n",
         dict(n_labels=1), r"line 5: expected '\}' closing the sparse instance"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n{0 1, 1}\n",
         dict(n_labels=1), r"line 5: expected 'index value' in a sparse instance"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n1,0\n",
         {}, r"cannot tell which attributes are labels"),
        ("@relation 'r: -C 5'\n@attribute a numeric\n@attribute l {0,1}\n@data\n1,0\n",
         {}, r"-C 5, expected a nonzero label count of at most the 2 attributes"),
        ("@relation r\n@attribute a numeric\n@attribute l {0,1}\n@data\n1,0\n",
         dict(n_labels=3), r"n_labels must be <= 2"),
        ("@relation r\n@attribute l numeric\n@attribute l {0,1}\n@data\n1,0\n",
         dict(n_labels=1), r"line 3: attribute 'l' declared twice \(first on line 2\)"),
        ("@relation r\n@attribute a {u,v,u}\n@attribute l {0,1}\n@data\nu,0\n",
         dict(n_labels=1), r"line 2: nominal value 'u' declared twice for attribute 'a'"),
    ],
)
def test_malformed_arff_errors_name_line_and_expectation(text, kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_arff(io.StringIO(text), **kwargs)


def test_xml_errors(tmp_path):
    arff = _write(tmp_path, "e.arff", MULAN_DENSE)
    with pytest.raises(ValueError, match=r"labels \['sad'\] are not attributes"):
        load_arff(arff, xml=io.StringIO('<labels><label name="sad"/></labels>'))
    with pytest.raises(ValueError, match="not well-formed XML"):
        load_arff(arff, xml=io.StringIO("<labels><label name='x'>"))
    with pytest.raises(ValueError, match="either xml .* or n_labels"):
        load_arff(arff, xml=io.StringIO(MULAN_XML), n_labels=2)
    with pytest.raises(ValueError, match="label_location must be one of"):
        load_arff(arff, n_labels=2, label_location="middle")
    with pytest.raises(TypeError, match="path must be a path"):
        load_arff(42, n_labels=1)


# --------------------------------------------------------------------------
# XMC
# --------------------------------------------------------------------------

XMC = """\
4 6 5
0,3 0:1.5 4:2
 2:0.5
4 1:1 5:-1

"""


def test_xmc_small_file_with_empty_label_lists(tmp_path):
    data = load_xmc(_write(tmp_path, "train.txt", XMC))
    X, Y, fn, ln = data
    assert fn is None and ln is None
    assert X.format == "csr" and Y.format == "csr"
    _assert_dense_equal(
        X, [[1.5, 0, 0, 0, 2, 0], [0, 0, 0.5, 0, 0, 0], [0, 1, 0, 0, 0, -1], [0] * 6]
    )
    _assert_dense_equal(
        Y, [[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]
    )


def test_xmc_one_based_and_file_objects():
    text = "2 3 3\n1,3 1:0.5 3:1\n2 2:4\n"
    X, Y, _, _ = load_xmc(io.BytesIO(text.encode()), zero_based=False)
    _assert_dense_equal(X, [[0.5, 0, 1], [0, 4, 0]])
    _assert_dense_equal(Y, [[1, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"line 2: expected label ids in \[1, 4\), got 0"):
        load_xmc(io.StringIO("1 3 3\n0 1:1\n"), zero_based=False)


def test_xmc_matches_sklearn_svmlight_reader(tmp_path):
    rng = np.random.default_rng(0)
    n, p, d = 60, 40, 25
    lines = [f"{n} {p} {d}"]
    for i in range(n):
        labels = np.sort(rng.choice(d, size=rng.integers(0, 4), replace=False))
        # (at least one feature: scikit-learn's reader skips blank lines)
        feats = np.sort(rng.choice(p, size=rng.integers(1, 6), replace=False))
        vals = np.round(rng.standard_normal(feats.size), 4)
        lab = ",".join(map(str, labels))
        lines.append(" ".join([lab] + [f"{f}:{v}" for f, v in zip(feats, vals)]))
    text = "\n".join(lines) + "\n"
    path = _write(tmp_path, "random.txt", text)
    X, Y, _, _ = load_xmc(path)
    body = io.BytesIO("\n".join(lines[1:]).encode() + b"\n")
    Xs, ys = load_svmlight_file(body, n_features=p, multilabel=True, zero_based=True)
    np.testing.assert_allclose(X.toarray(), Xs.toarray())
    expected_Y = np.zeros((n, d))
    for i, labs in enumerate(ys):
        expected_Y[i, [int(v) for v in labs]] = 1
    _assert_dense_equal(Y, expected_Y)


@pytest.mark.parametrize(
    "text,match",
    [
        ("", r"line 1: expected a header 'n_samples n_features n_labels', got an empty file"),
        ("3 4\n", r"line 1: expected a header of three non-negative integers"),
        ("2 4 3\n0 1:1\n", r"line 3: expected 2 sample lines as the header says, got 1"),
        ("1 4 3\n0 1:1\n1 2:1\n", r"line 3: expected 1 sample lines as the header says, got more"),
        ("1 4 3\n0,x 1:1\n", r"line 2: expected comma-separated integer label ids, got '0,x'"),
        ("1 4 3\n0 1:a\n", r"line 2: expected a 'feature:value' pair of numbers, got '1:a'"),
        ("1 4 3\n0 1\n", r"line 2: expected a 'feature:value' pair, got '1'"),
        ("2 4 3\n0 1:1\n3 1:1\n", r"line 3: expected label ids in \[0, 3\), got 3"),
        ("2 4 3\n0 1:1\n1 4:1\n", r"line 3: expected feature ids in \[0, 4\), got 4"),
        ("1 4 3\n0,0 1:1\n", r"line 2: expected each label id at most once per line, got 0 twice"),
        ("1 4 3\n0 1:1 1:2\n", r"line 2: expected each feature id at most once per line"),
        ("1 4 3\n0 1.0:1\n", r"line 2: expected a 'feature:value' pair of numbers, got '1.0:1'"),
        ("1 4 3\n0 1e0:1\n", r"line 2: expected a 'feature:value' pair of numbers, got '1e0:1'"),
        ("1 4 3\n0 99999999999999999999:1\n",
         r"line 2: expected feature ids below 2\*\*62, got 99999999999999999999"),
        ("1 4 3\n99999999999999999999 1:1\n",
         r"line 2: expected label ids below 2\*\*62, got 99999999999999999999"),
        ("1 4 3\n0 9007199254740993:1\n", r"line 2: expected feature ids in \[0, 4\), got 9007199254740993"),
    ],
)
def test_malformed_xmc_errors_name_line_and_expectation(text, match):
    with pytest.raises(ValueError, match=match):
        load_xmc(io.StringIO(text))


def test_xmc_rejects_bad_arguments():
    for dtype in ("U3", object, np.float16, np.int64):
        with pytest.raises(TypeError, match="dtype must be float32 or float64"):
            load_xmc(io.StringIO("1 2 1\n0 1:1\n"), dtype=dtype)
    assert load_xmc(io.StringIO("1 2 1\n0 1:1\n"), dtype=np.float32).X.dtype == np.float32
    with pytest.raises(TypeError, match="zero_based must be a bool"):
        load_xmc(io.StringIO("0 1 1\n"), zero_based="auto")
    with pytest.raises(TypeError, match="path must be a path"):
        load_xmc(3.5)
