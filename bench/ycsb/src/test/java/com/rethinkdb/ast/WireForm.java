package com.rethinkdb.ast;

import com.fasterxml.jackson.databind.ObjectMapper;

/** Test helper: a query's wire form (ReqlAst.build() is protected, so this lives in its package). */
public final class WireForm {
  private static final ObjectMapper JSON = new ObjectMapper();

  private WireForm() {
  }

  public static String json(ReqlAst q) {
    try {
      return JSON.writeValueAsString(q.build());
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }
}
