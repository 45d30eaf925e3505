package dev.dynembed.table.client;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a public type of {@code dev.dynembed.table.client.internal}: public only because the
 * client's own packages ({@code client}, {@code client.spi}) share it across package lines, not
 * part of the API, free to change. The client's surface is {@code dev.dynembed.table.client} and
 * {@code dev.dynembed.table.client.spi}; no class outside the client's packages may use
 * {@code client.internal}, and its public types are exactly the marked ones: the architecture
 * module's {@code BoundariesTest} checks both.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.TYPE)
public @interface Internal {}
