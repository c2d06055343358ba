// Evaluated once per run, before the program. It receives the two host functions and the sorted
// binding names, and returns the program's globals plus the helpers the engine loop calls. The
// helpers capture the built-ins they use now, so a program that replaces `JSON` or `Object`
// breaks only itself, not the runtime's checks.
(function (hostCall, hostLog, names) {
  "use strict";
  const { create, defineProperty, freeze, getOwnPropertySymbols, getPrototypeOf, keys } = Object;
  const ObjectPrototype = Object.prototype;
  const ArrayPrototype = Array.prototype;
  const ErrorCtor = Error;
  const PromiseCtor = Promise;
  const MapCtor = Map;
  const SetCtor = Set;
  const TypeErrorCtor = TypeError;
  const isArray = Array.isArray;
  const isFinite = Number.isFinite;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const apply = Reflect.apply;
  const regexpTest = RegExp.prototype.test;
  const objectToString = ObjectPrototype.toString;
  const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const AsyncFunction = (async function () {}).constructor;
  const pending = new MapCtor();

  class ToolCallError extends ErrorCtor {
    constructor(toolName, message) {
      super(message);
      defineProperty(this, "toolName", { value: toolName, enumerable: true });
    }
  }
  defineProperty(ToolCallError.prototype, "name", {
    value: "ToolCallError",
    writable: true,
    configurable: true,
  });

  function memberPath(base, key) {
    return apply(regexpTest, identifier, [key]) ? `${base}.${key}` : `${base}[${stringify(key)}]`;
  }

  function kindName(value) {
    try {
      const ctor = value.constructor;
      if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name !== "") {
        return `a ${ctor.name} object`;
      }
    } catch (_) {
      // A throwing getter still names the value below.
    }
    return "an object that is not a plain object";
  }

  function notJson(path, what) {
    return new TypeErrorCtor(`${path} is ${what}, which JSON cannot represent`);
  }

  // The JSON text of `root`, or a TypeError naming the first part that JSON would lose. Walks
  // with an explicit stack, so deep values cannot overflow the call stack here.
  function jsonText(root, rootPath) {
    const stack = [[root, rootPath, false]];
    const open = new SetCtor();
    while (stack.length > 0) {
      const [value, path, leaving] = stack.pop();
      if (leaving) {
        open.delete(value);
        continue;
      }
      switch (typeof value) {
        case "string":
        case "boolean":
          continue;
        case "number":
          if (!isFinite(value)) throw notJson(path, `${value}`);
          if (value === 0 && 1 / value < 0) throw notJson(path, "-0");
          continue;
        case "undefined":
          throw notJson(path, "undefined");
        case "bigint":
          throw notJson(path, "a BigInt");
        case "symbol":
          throw notJson(path, "a symbol");
        case "function":
          throw notJson(path, "a function");
      }
      if (value === null) continue;
      if (open.has(value)) {
        throw new TypeErrorCtor(`${path} refers back to an enclosing value (a cycle), which JSON cannot represent`);
      }
      if (getOwnPropertySymbols(value).length > 0) throw notJson(path, "an object with symbol keys");
      open.add(value);
      stack.push([value, path, true]);
      if (isArray(value)) {
        if (getPrototypeOf(value) !== ArrayPrototype) throw notJson(path, "an exotic array");
        for (let i = value.length - 1; i >= 0; i--) {
          if (!(i in value)) throw notJson(`${path}[${i}]`, "a hole in a sparse array");
          stack.push([value[i], `${path}[${i}]`, false]);
        }
      } else {
        const proto = getPrototypeOf(value);
        if (proto !== ObjectPrototype && proto !== null) throw notJson(path, kindName(value));
        const own = keys(value);
        for (let i = own.length - 1; i >= 0; i--) {
          stack.push([value[own[i]], memberPath(path, own[i]), false]);
        }
      }
    }
    return stringify(root);
  }

  // The program's source is the body of the function the AsyncFunction constructor builds,
  // which puts two lines of its own before the body.
  const BODY_FIRST_LINE = 3;
  const sourcePosition = /<input>:(\d+):(\d+)/;
  const regexpExec = RegExp.prototype.exec;

  // Where in the program an error was raised, as ` (line L, column C)`, or "" when unknown.
  function location(error) {
    const stack = error.stack;
    if (typeof stack !== "string") return "";
    const found = apply(regexpExec, sourcePosition, [stack]);
    if (found === null) return "";
    const line = Number(found[1]) - BODY_FIRST_LINE + 1;
    return line >= 1 ? ` (line ${line}, column ${found[2]})` : "";
  }

  function describe(error) {
    try {
      if (error instanceof ErrorCtor) {
        const text = `${error.name}: ${error.message}`;
        if (error instanceof ToolCallError) return `${text} (from tool ${stringify(error.toolName)})`;
        return text + location(error);
      }
      return `uncaught ${show(error)}`;
    } catch (_) {
      return "uncaught exception (describing it threw again)";
    }
  }

  function show(value) {
    switch (typeof value) {
      case "string":
        return value;
      case "undefined":
        return "undefined";
      case "function":
        return `[Function${value.name ? ": " + value.name : ""}]`;
      case "bigint":
        return `${value}n`;
      case "symbol":
        return value.toString();
      case "number":
        return value === 0 && 1 / value < 0 ? "-0" : `${value}`;
      case "boolean":
        return `${value}`;
    }
    if (value === null) return "null";
    if (value instanceof ErrorCtor) return describe(value);
    try {
      const text = stringify(value);
      if (text !== undefined) return text;
    } catch (_) {
      // A cycle or a throwing toJSON: fall back to the tag.
    }
    return apply(objectToString, value, []);
  }

  const tools = create(null);
  for (const name of names) {
    const binding = function (args) {
      if (args === undefined) {
        return PromiseCtor.reject(new TypeErrorCtor(
          "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)"));
      }
      let text;
      try {
        text = jsonText(args, "arguments");
      } catch (error) {
        return PromiseCtor.reject(new TypeErrorCtor(`tool arguments must be lossless JSON: ${error.message}`));
      }
      let id;
      try {
        id = hostCall(name, text);
      } catch (error) {
        return PromiseCtor.reject(error);
      }
      return new PromiseCtor((resolve, reject) => {
        pending.set(id, { resolve, reject });
      });
    };
    defineProperty(binding, "name", { value: name });
    defineProperty(tools, name, { value: binding, enumerable: true });
  }
  freeze(tools);

  const console = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    console[level] = function (...args) {
      let text = "";
      for (let i = 0; i < args.length; i++) text += (i === 0 ? "" : " ") + show(args[i]);
      hostLog(level, text);
    };
  }

  return {
    tools,
    console,
    ToolCallError,
    compile: (source) => new AsyncFunction(source),
    complete: (value) => (value === undefined ? undefined : jsonText(value, "the completion")),
    describe,
    settle(id, ok, payload, toolName) {
      const entry = pending.get(id);
      if (entry === undefined) return;
      pending.delete(id);
      if (!ok) {
        entry.reject(new ToolCallError(toolName, payload));
        return;
      }
      let value;
      try {
        value = parse(payload);
      } catch (error) {
        entry.reject(new ToolCallError(toolName, `the tool's result could not be read: ${error.message}`));
        return;
      }
      entry.resolve(value);
    },
  };
})
