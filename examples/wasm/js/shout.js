// A cordis:plugin/tools@0.1.0 guest in JavaScript (componentize-qjs, QuickJS).
let suffix = "!";
export const guest = {
  init(config) {
    const parsed = JSON.parse(config);
    if (typeof parsed.suffix === "string") suffix = parsed.suffix;
  },
  describe() {
    return [{
      name: "js_shout",
      description: "Shouts a text (a JavaScript guest).",
      parameters: JSON.stringify({type: "object", properties: {text: {type: "string"}}, required: ["text"]}),
      effect: "read",
    }];
  },
  call(name, args) {
    const { text } = JSON.parse(args);
    if (typeof text !== "string") throw "expected {\"text\": string}";
    return JSON.stringify({ shout: text.toUpperCase() + suffix });
  },
};
