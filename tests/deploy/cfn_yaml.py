"""CloudFormation YAML for the deploy tests: PyYAML's safe loader plus the
short-form intrinsic tags (!Ref, !Sub, !GetAtt, ...) as the long-form maps
CloudFormation turns them into, so a test reads {"Fn::Sub": ...} whichever
form the template uses."""
import yaml

_FN = ["Base64", "Cidr", "FindInMap", "GetAZs", "ImportValue", "Join", "Select", "Split", "Sub",
       "Transform", "And", "Equals", "If", "Not", "Or", "Condition", "GetAtt", "Length", "ToJsonString"]


class Loader(yaml.SafeLoader):
    """SafeLoader that knows CloudFormation's short tags."""


def _construct(name):
    def construct(loader, node):
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
            if name == "Fn::GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}
    return construct


Loader.add_constructor("!Ref", _construct("Ref"))
for _f in _FN:
    Loader.add_constructor("!" + _f, _construct("Condition" if _f == "Condition" else "Fn::" + _f))


def load(path):
    """The template at path as plain dicts and lists."""
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=Loader)
