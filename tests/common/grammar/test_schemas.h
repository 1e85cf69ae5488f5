// Response formats shared by the grammar tests and the mask benchmark: each a
// spec string (what Grammar::Compile takes) and the JSON Schema an independent
// validator checks the generated documents against.
#pragma once

#include <string>
#include <vector>

namespace tandem::grammar::testing {

struct TestFormat {
  std::string name;
  std::string spec;    // {"type":"json_schema","schema":...} or {"type":"json_object"}
  std::string schema;  // for the validator
};

inline TestFormat SchemaFormat(std::string name, const std::string& schema) {
  return {std::move(name), R"({"type":"json_schema","schema":)" + schema + "}", schema};
}

inline std::vector<TestFormat> TestFormats() {
  std::vector<TestFormat> f;
  f.push_back({"json_object", R"({"type":"json_object"})", R"({"type":"object"})"});
  auto add = [&](std::string name, const std::string& schema) { f.push_back(SchemaFormat(std::move(name), schema)); };
  add("person", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})");
  add("optional_props", R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]})");
  add("all_optional", R"({"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"},"z":{"type":"null"}}})");
  add("string_enum", R"({"type":"object","properties":{"color":{"enum":["red","green","blue","re"]}},"required":["color"]})");
  add("mixed_enum", R"({"type":"object","properties":{"v":{"enum":[1,12,"x",null,true,{"k":[1,2]},[3]]}},"required":["v"]})");
  add("const", R"({"type":"object","properties":{"kind":{"const":"point"},"n":{"const":3}},"required":["kind","n"]})");
  add("int_array", R"({"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4}},"required":["xs"]})");
  add("string_array", R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["tags"]})");
  add("empty_array_only", R"({"type":"object","properties":{"e":{"type":"array","maxItems":0}},"required":["e"]})");
  add("tuple", R"({"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false,"minItems":2}},"required":["t"]})");
  add("tuple_rest", R"({"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string","maxLength":3}}},"required":["t"]})");
  add("string_bounds", R"({"type":"object","properties":{"code":{"type":"string","minLength":3,"maxLength":5}},"required":["code"]})");
  add("long_min_string", R"({"type":"object","properties":{"s":{"type":"string","minLength":12}},"required":["s"]})");
  add("type_list", R"({"type":"object","properties":{"v":{"type":["string","integer","null"]}},"required":["v"]})");
  add("any_of", R"({"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":4},{"type":"number"},{"type":"array","items":{"type":"boolean"},"maxItems":2}]}},"required":["v"]})");
  add("one_of_disjoint", R"({"type":"object","properties":{"v":{"oneOf":[{"type":"integer"},{"type":"boolean"}]}},"required":["v"]})");
  add("any_of_objects", R"({"type":"object","properties":{"shape":{"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},"required":["kind","w","h"]}]}},"required":["shape"]})");
  add("any_of_overlap", R"({"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}]})");
  add("nested", R"({"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer"},"profile":{"type":"object","properties":{"bio":{"type":"string","maxLength":20},"links":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":2}},"required":["bio"]}},"required":["id","profile"]}},"required":["user"]})");
  add("defs_ref", R"({"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/point"},"b":{"$ref":"#/$defs/point"}},"required":["a","b"]})");
  add("definitions_ref", R"({"definitions":{"name":{"type":"string","maxLength":6}},"type":"object","properties":{"first":{"$ref":"#/definitions/name"},"last":{"$ref":"#/definitions/name"}},"required":["first"]})");
  add("recursive_tree", R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"]}},"$ref":"#/$defs/node"})");
  add("recursive_list", R"({"$defs":{"list":{"anyOf":[{"type":"null"},{"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/$defs/list"}},"required":["head","tail"]}]}},"type":"object","properties":{"l":{"$ref":"#/$defs/list"}},"required":["l"]})");
  add("root_ref", R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"child":{"$ref":"#"}},"required":["name"]})");
  add("additional_true", R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":true})");
  add("additional_schema", R"({"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})");
  add("map_only", R"({"type":"object","additionalProperties":{"type":"integer"}})");
  add("numbers", R"({"type":"object","properties":{"i":{"type":"integer"},"f":{"type":"number"},"g":{"type":"number"}},"required":["i","f","g"]})");
  add("booleans", R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"}},"required":["a","b"]})");
  add("nulls", R"({"type":"object","properties":{"n":{"type":"null"}},"required":["n"]})");
  add("root_array", R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  add("root_string", R"({"type":"string","maxLength":10})");
  add("root_integer", R"({"type":"integer"})");
  add("root_enum", R"({"enum":["yes","no","maybe"]})");
  add("untyped_props", R"({"properties":{"k":{"type":"string"}},"required":["k"]})");
  add("any_value_prop", R"({"type":"object","properties":{"meta":{}},"required":["meta"]})");
  add("array_of_objects", R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string","maxLength":6},"qty":{"type":"integer"}},"required":["sku","qty"]},"minItems":1,"maxItems":3}},"required":["items"]})");
  add("matrix", R"({"type":"object","properties":{"m":{"type":"array","items":{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":2},"minItems":2,"maxItems":2}},"required":["m"]})");
  add("unicode_keys", R"({"type":"object","properties":{"名前":{"type":"string","maxLength":4},"naïve":{"type":"boolean"},"quo\"te":{"type":"integer"}},"required":["名前","naïve","quo\"te"]})");
  add("enum_unicode", R"({"type":"object","properties":{"e":{"enum":["über","ü","日本","a\"b","tab\t"]}},"required":["e"]})");
  add("prefix_keys", R"({"type":"object","properties":{"ab":{"type":"integer"},"abc":{"type":"integer"},"a":{"type":"integer"}}})");
  add("prefix_keys_additional", R"({"type":"object","properties":{"ab":{"type":"integer"},"abc":{"type":"boolean"}},"additionalProperties":{"type":"null"}})");
  add("deep_nesting", R"({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"object","properties":{"d":{"type":"object","properties":{"e":{"type":"array","items":{"type":"object","properties":{"f":{"type":"string","maxLength":3}},"required":["f"]},"minItems":1,"maxItems":2}},"required":["e"]}},"required":["d"]}},"required":["c"]}},"required":["b"]}},"required":["a"]})");
  add("nullable_string", R"({"type":"object","properties":{"s":{"anyOf":[{"type":"string","maxLength":5},{"type":"null"}]}},"required":["s"]})");
  add("enum_with_type", R"({"type":"object","properties":{"v":{"type":"string","enum":["a","b",1,2]}},"required":["v"]})");
  add("integer_enum", R"({"type":"object","properties":{"level":{"type":"integer","enum":[1,2,3,10]}},"required":["level"]})");
  add("min_items_only", R"({"type":"object","properties":{"xs":{"type":"array","items":{"type":"boolean"},"minItems":3}},"required":["xs"]})");
  add("event", R"({"type":"object","properties":{"title":{"type":"string","maxLength":30},"date":{"type":"string","minLength":10,"maxLength":10},"attendees":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3},"public":{"type":"boolean"}},"required":["title","date","public"],"additionalProperties":false})");
  add("tool_call", R"({"type":"object","properties":{"name":{"enum":["get_weather","search"]},"arguments":{"type":"object","properties":{"city":{"type":"string","maxLength":12},"units":{"enum":["c","f"]},"days":{"type":"integer"}},"required":["city"]}},"required":["name","arguments"]})");
  add("list_of_anyof", R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":3},{"type":"object","properties":{"k":{"type":"null"}},"required":["k"]}]},"maxItems":4})");
  add("two_level_defs", R"({"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}},"required":["b"]},"b":{"type":"array","items":{"$ref":"#/$defs/c"},"maxItems":2},"c":{"enum":["x","y"]}},"$ref":"#/$defs/a"})");
  add("bool_schema_items", R"({"type":"object","properties":{"free":{"type":"array","items":true,"maxItems":2}},"required":["free"]})");
  add("ignored_annotations", R"({"$schema":"https://json-schema.org/draft/2020-12/schema","title":"T","description":"d","type":"object","properties":{"q":{"type":"string","description":"x","default":"a","examples":["b"],"maxLength":4}},"required":["q"]})");
  return f;
}

}  // namespace tandem::grammar::testing
