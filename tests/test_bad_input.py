"""Bad input raises typed errors that name the offending element or argument."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import models

LINK = '<link name="{n}"><inertial><mass value="{m}"/><inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial></link>'


def urdf(links, joints):
    return "<robot name='r'>" + "".join(links) + "".join(joints) + "</robot>"


def joint(name, parent, child, kind="revolute"):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<axis xyz="0 0 1"/></joint>')


GOOD_LINKS = [LINK.format(n="base", m=1, i=0.1), LINK.format(n="l1", m=1, i=0.1), LINK.format(n="l2", m=1, i=0.1)]


def test_good_urdf_loads():
    m = sd.load_urdf(urdf(GOOD_LINKS, [joint("j1", "base", "l1"), joint("j2", "l1", "l2")]))
    assert m.joint_names == ("j1", "j2")


@pytest.mark.parametrize("text,needle", [
    ("<robot><link name='a'>", "malformed"),
    ("<notrobot/>", "<robot>"),
    (urdf(GOOD_LINKS, [joint("j1", "base", "l1", kind="screw"), joint("j2", "l1", "l2")]), "'j1'"),
    (urdf(GOOD_LINKS, [joint("j1", "base", "l1"), joint("j2", "nolink", "l2")]), "'nolink'"),
    (urdf(GOOD_LINKS, [joint("j1", "base", "l1"), joint("j2", "l1", "l2"), joint("j3", "l2", "l1")]), "'l1'"),
    (urdf(GOOD_LINKS, [joint("j1", "l2", "l1"), joint("j2", "l1", "l2")]), "cycle"),
    (urdf(GOOD_LINKS, [joint("j1", "base", "l1")]), "root"),
    (urdf([LINK.format(n="base", m=1, i=0.1), LINK.format(n="l1", m=-2, i=0.1)], [joint("j1", "base", "l1")]), "'l1'"),
    (urdf([LINK.format(n="base", m=1, i=0.1), LINK.format(n="l1", m=1, i=-0.1)], [joint("j1", "base", "l1")]), "'l1'"),
    (urdf([LINK.format(n="base", m=1, i=0.1), LINK.format(n="l1", m="abc", i=0.1)], [joint("j1", "base", "l1")]), "'l1'"),
])
def test_malformed_urdf(text, needle):
    with pytest.raises(sd.ModelError) as err:
        sd.load_urdf(text, strict=True)     # strict: a non-PSD inertia too (else a ModelWarning)
    assert needle in str(err.value)


def test_missing_file():
    with pytest.raises(sd.ModelError, match="does not exist"):
        sd.load_urdf("/nonexistent/robot.urdf")


def test_zero_axis_named():
    text = urdf(GOOD_LINKS[:2], ['<joint name="jz" type="revolute"><parent link="base"/><child link="l1"/>'
                                 '<axis xyz="0 0 0"/></joint>'])
    with pytest.raises(sd.ModelError, match="'jz'"):
        sd.load_urdf(text)


def test_state_errors_name_argument():
    m = models.humanoid()
    q, v = m.neutral_configuration(), np.zeros(m.nv)
    with pytest.raises(ValueError, match="^q:"):
        sd.rnea(m, q[:-1], v, v)
    with pytest.raises(ValueError, match="^a:"):
        sd.rnea(m, q, v, np.zeros((2, 3)))
    bad = v.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="^v: non-finite"):
        sd.rnea(m, q, bad, v)
    with pytest.raises(ValueError, match="^tau: non-finite"):
        sd.aba(m, q, v, np.full(m.nv, np.inf))
    q2 = q.copy()
    q2[3:7] = [0, 0, 0, 2.0]
    with pytest.raises(ValueError, match="root_joint"):
        sd.crba(m, q2)
    with pytest.raises(ValueError, match="batch size"):
        sd.rnea(m, np.tile(q, (3, 1)), np.zeros((2, m.nv)), np.zeros((3, m.nv)))
    with pytest.raises(KeyError, match="no_such_link"):
        sd.rnea(m, q, v, v, f_ext={"no_such_link": np.zeros(6)})
    with pytest.raises(ValueError, match="f_ext\\['l_sole'\\]"):
        sd.rnea(m, q, v, v, f_ext={"l_sole": np.zeros(5)})


def test_model_is_read_only():
    m = models.serial_chain(3)
    with pytest.raises(AttributeError, match="read-only"):
        m.nv = 4
    with pytest.raises(ValueError):
        m.inertias[0, 0, 0] = 5.0
    with pytest.raises(TypeError):
        m.frames["x"] = None


def test_singular_mass_matrix_names_bodies():
    """A massless leaf link (as in romeo's published URDF) makes M singular: FD must say so."""
    text = urdf([LINK.format(n="base", m=1, i=0.1), LINK.format(n="l1", m=1, i=0.1),
                 '<link name="massless"/>'], [joint("j1", "base", "l1"), joint("j2", "l1", "massless")])
    m = sd.load_urdf(text)
    with pytest.raises(sd.SingularModelError, match="massless") as err:
        sd.aba(m, np.zeros((2, 2)), np.zeros((2, 2)), np.ones((2, 2)))
    assert err.value.batch_indices == (0, 1)
